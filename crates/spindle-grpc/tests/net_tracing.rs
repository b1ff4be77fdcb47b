//! Call spans (feature `tracing`): each call served over the network runs in a `grpc` span
//! with its service, method, status and latency, closed by a `finished processing call` event;
//! each call the network client sends has a `grpc_client` span with the same fields, inside
//! the caller's span, closed by a `finished call` event.

use std::sync::{Arc, Mutex};

use spindle_grpc::{Channel, Endpoint, Server};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

fn sleep(d: std::time::Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(spindle::time::sleep_future(d))
}

#[derive(Default)]
struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}").trim_matches('"').to_owned()));
    }
}

/// Every span's name and fields (recorded ones included) and its parent's name, and every
/// event with its span.
#[derive(Default)]
struct Seen {
    spans: Vec<(String, Fields, Option<String>)>,
    events: Vec<(Fields, Option<usize>)>,
}

struct Capture(Arc<Mutex<Seen>>);

struct Index(usize);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let parent = ctx.span(id).unwrap().parent().map(|p| p.name().to_owned());
        let mut seen = self.0.lock().unwrap();
        seen.spans.push((attrs.metadata().name().to_owned(), fields, parent));
        ctx.span(id).unwrap().extensions_mut().insert(Index(seen.spans.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let ext = span.extensions();
        let mut seen = self.0.lock().unwrap();
        values.record(&mut seen.spans[ext.get::<Index>().unwrap().0].1);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let span = ctx.event_span(event).and_then(|s| s.extensions().get::<Index>().map(|i| i.0));
        self.0.lock().unwrap().events.push((fields, span));
    }
}

fn get<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields.0.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[test]
fn each_call_runs_in_a_grpc_span_with_its_status() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture(seen.clone())))
        .unwrap();
    let rt = spindle::Runtime::new().unwrap();
    let service = TestServiceServer::new(spindle_grpc_interop::Server::new(sleep));
    let channel = Channel::new().with_handle(rt.handle()).add_service(service);
    let codes = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let serving = Server::new(channel).serve_tcp(listener).unwrap();
        let endpoint = Endpoint::new(format!("http://{}", serving.local_addr().unwrap())).unwrap();
        let caller = tracing::info_span!("caller");
        spindle::task::block_on(tracing::Instrument::instrument(
            async move {
                let mut client = TestServiceClient::new(endpoint.connect().await.unwrap());
                let ok = client.unary_call(SimpleRequest { response_size: 3, ..Default::default() }).await;
                let failed = client
                    .unary_call(SimpleRequest {
                        response_status: Some(EchoStatus { code: 5, message: "not here".into() }),
                        ..Default::default()
                    })
                    .await;
                (ok.is_ok(), failed.unwrap_err().code())
            },
            caller,
        ))
    });
    assert_eq!(codes, (true, tonic::Code::NotFound));
    let seen = seen.lock().unwrap();
    let calls: Vec<usize> = (0..seen.spans.len()).filter(|&i| seen.spans[i].0 == "grpc").collect();
    assert_eq!(calls.len(), 2, "one span per call");
    for (&i, status) in calls.iter().zip(["0", "5"]) {
        let fields = &seen.spans[i].1;
        assert_eq!(get(fields, "service"), Some("spindle.interop.TestService"));
        assert_eq!(get(fields, "method"), Some("UnaryCall"));
        assert_eq!(get(fields, "status"), Some(status));
        assert!(get(fields, "latency_ms").is_some());
        let finished = seen
            .events
            .iter()
            .filter(|(f, span)| *span == Some(i) && get(f, "message") == Some("finished processing call"))
            .count();
        assert_eq!(finished, 1, "one closing event in the call's span");
    }
    let sent: Vec<usize> = (0..seen.spans.len()).filter(|&i| seen.spans[i].0 == "grpc_client").collect();
    assert_eq!(sent.len(), 2, "one client span per call");
    for (&i, status) in sent.iter().zip(["0", "5"]) {
        let (_, fields, parent) = &seen.spans[i];
        assert_eq!(parent.as_deref(), Some("caller"), "the client span is inside the caller's");
        assert_eq!(get(fields, "service"), Some("spindle.interop.TestService"));
        assert_eq!(get(fields, "method"), Some("UnaryCall"));
        assert_eq!(get(fields, "status"), Some(status));
        assert!(get(fields, "latency_ms").is_some());
        let finished = seen
            .events
            .iter()
            .filter(|(f, span)| *span == Some(i) && get(f, "message") == Some("finished call"))
            .count();
        assert_eq!(finished, 1, "one closing event in the client call's span");
    }
}
