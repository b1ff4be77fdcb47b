//! Request spans (feature `tracing`): each request runs in a `request` span with its method,
//! path, version, and, once answered, its status and latency; a blocking handler's fiber runs
//! inside it across its parks, and a second request's handler never sees the first's span.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::get;
use spindle_http::{Body, Request, Response, Server};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Default, Clone, Debug)]
struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}").trim_matches('"').to_owned()));
    }
}

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Every span's name and fields, and every event with the spans of its scope.
#[derive(Default)]
struct Seen {
    spans: Vec<(String, Fields)>,
    events: Vec<(Fields, Vec<usize>)>,
}

struct Capture(Arc<Mutex<Seen>>);

struct Index(usize);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let mut seen = self.0.lock().unwrap();
        seen.spans.push((attrs.metadata().name().to_owned(), fields));
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
        let scope = ctx
            .event_scope(event)
            .map(|s| s.from_root().filter_map(|s| s.extensions().get::<Index>().map(|i| i.0)).collect())
            .unwrap_or_default();
        self.0.lock().unwrap().events.push((fields, scope));
    }
}

#[test]
fn each_request_runs_in_its_own_span() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture(seen.clone())))
        .unwrap();
    let server = Server::builder()
        .serve("127.0.0.1:0", |req: Request<Body>| {
            let path = req.uri().path().to_owned();
            tracing::info!(path, "handler before park");
            spindle::time::sleep(Duration::from_millis(5));
            tracing::info!(path, "handler after park");
            if path == "/missing" {
                let mut res = Response::new("no");
                *res.status_mut() = spindle_http::StatusCode::NOT_FOUND;
                return res;
            }
            Response::new("yes")
        })
        .unwrap();
    let addr = server.local_addr();
    let clients: Vec<_> = ["/a", "/missing"]
        .into_iter()
        .map(|path| std::thread::spawn(move || get(addr, path).status))
        .collect();
    let statuses: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert_eq!(statuses, [200, 404]);
    server.shutdown();
    let seen = seen.lock().unwrap();
    for (path, status) in [("/a", "200"), ("/missing", "404")] {
        let span = (0..seen.spans.len())
            .find(|&i| seen.spans[i].0 == "request" && seen.spans[i].1.get("path") == Some(path))
            .unwrap_or_else(|| panic!("a request span for {path}"));
        let fields = &seen.spans[span].1;
        assert_eq!(fields.get("method"), Some("GET"));
        assert_eq!(fields.get("status"), Some(status));
        assert!(fields.get("latency_ms").is_some());
        for message in ["handler before park", "handler after park"] {
            let scopes: Vec<&Vec<usize>> = seen
                .events
                .iter()
                .filter(|(f, _)| f.get("message") == Some(message) && f.get("path") == Some(path))
                .map(|(_, scope)| scope)
                .collect();
            assert_eq!(scopes, [&vec![span]], "{message} of {path}: in its request's span only");
        }
        let finished = seen
            .events
            .iter()
            .filter(|(f, scope)| {
                f.get("message") == Some("finished processing request") && scope == &vec![span]
            })
            .count();
        assert_eq!(finished, 1);
    }
}
