//! tracing's current span belongs to the fiber (feature `tracing`): a span entered in one fiber
//! is not seen by the others of its worker, comes back when the fiber resumes, is inherited by
//! the fibers it spawns, and the runtime reports its own events.
//!
//! One subscriber for the process (worker threads see only the global default): a layer that
//! records every event with the spans of its scope, written as `name{fields}`. Each test
//! finds its own events by their messages.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Clone, Debug)]
struct Record {
    target: String,
    message: String,
    fields: String,
    scope: Vec<String>,
}

#[derive(Default)]
struct Text {
    message: String,
    fields: Vec<String>,
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.fields.push(format!("{}={value:?}", field.name()));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.fields.push(format!("{}={value}", field.name()));
        }
    }
}

struct Label(String);

struct Capture(Arc<Mutex<Vec<Record>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut text = Text::default();
        attrs.record(&mut text);
        let label = format!("{}{{{}}}", attrs.metadata().name(), text.fields.join(","));
        ctx.span(id).expect("a new span").extensions_mut().insert(Label(label));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut text = Text::default();
        event.record(&mut text);
        let scope = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .from_root()
                    .map(|s| s.extensions().get::<Label>().map_or_else(String::new, |l| l.0.clone()))
                    .collect()
            })
            .unwrap_or_default();
        self.0.lock().unwrap().push(Record {
            target: event.metadata().target().to_owned(),
            message: text.message,
            fields: text.fields.join(","),
            scope,
        });
    }
}

/// The process's recorded events (the subscriber is installed on first use).
fn records() -> Arc<Mutex<Vec<Record>>> {
    static RECORDS: OnceLock<Arc<Mutex<Vec<Record>>>> = OnceLock::new();
    RECORDS
        .get_or_init(|| {
            let records = Arc::new(Mutex::new(Vec::new()));
            let subscriber = tracing_subscriber::registry().with(Capture(records.clone()));
            tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
            records
        })
        .clone()
}

/// The recorded events whose message starts with `prefix`.
fn events(prefix: &str) -> Vec<Record> {
    records().lock().unwrap().iter().filter(|r| r.message.starts_with(prefix)).cloned().collect()
}

/// The program as a new user wrote it: three fibers enter their request span and park; an
/// unrelated fiber logs meanwhile. Its event has no span, and each request fiber, resumed,
/// is inside its own span only.
#[test]
fn a_span_entered_in_a_fiber_stays_in_that_fiber() {
    records();
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        let requests: Vec<_> = (1..=3)
            .map(|id| {
                spindle::spawn(move || {
                    let span = tracing::info_span!("request", id);
                    let _e = span.enter();
                    tracing::info!("leak: request {id} before");
                    spindle::time::sleep(Duration::from_millis(20));
                    tracing::info!("leak: request {id} after");
                })
            })
            .collect();
        let unrelated = spindle::spawn(|| {
            spindle::time::sleep(Duration::from_millis(5));
            tracing::info!("leak: unrelated fiber");
        });
        unrelated.join().unwrap();
        requests.into_iter().for_each(|r| r.join().unwrap());
    });
    let unrelated = events("leak: unrelated");
    assert_eq!(unrelated.len(), 1);
    assert!(
        unrelated[0].scope.is_empty(),
        "an unrelated fiber's event is in no span: {:?}",
        unrelated[0].scope
    );
    for id in 1..=3 {
        for when in ["before", "after"] {
            let e = events(&format!("leak: request {id} {when}"));
            assert_eq!(e.len(), 1);
            assert_eq!(e[0].scope, vec![format!("request{{id={id}}}")], "{when} the park");
        }
    }
}

/// Many fibers on two workers, each inside its own span, switching among themselves at every
/// step: every event is in its fiber's span and no other.
#[test]
fn switching_fibers_each_keep_their_own_span() {
    records();
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    rt.block_on(|| {
        let fibers: Vec<_> = (0..16)
            .map(|n| {
                spindle::spawn(move || {
                    let outer = tracing::info_span!("job", n);
                    let _o = outer.enter();
                    for step in 0..5 {
                        let inner = tracing::info_span!("step", step);
                        let _i = inner.enter();
                        spindle::yield_now();
                        tracing::info!("switching: {n} {step}");
                    }
                })
            })
            .collect();
        fibers.into_iter().for_each(|f| f.join().unwrap());
    });
    let all = events("switching: ");
    assert_eq!(all.len(), 16 * 5);
    for e in all {
        let mut words = e.message["switching: ".len()..].split(' ');
        let (n, step) = (words.next().unwrap(), words.next().unwrap());
        assert_eq!(e.scope, vec![format!("job{{n={n}}}"), format!("step{{step={step}}}")]);
    }
}

/// A fiber runs in its spawner's span; `Builder::instrument` gives another, or none.
#[test]
fn a_fiber_inherits_its_spawners_span_unless_told_otherwise() {
    records();
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let outer = tracing::info_span!("outer");
    let _e = outer.enter();
    rt.block_on(|| {
        tracing::info!("inherit: block_on body");
        let span = tracing::info_span!("parent");
        let _p = span.enter();
        let child = spindle::spawn(|| {
            spindle::yield_now();
            tracing::info!("inherit: child");
            spindle::spawn(|| tracing::info!("inherit: grandchild")).join().unwrap();
        });
        let given = spindle::fiber::Builder::new()
            .instrument(tracing::info_span!(parent: None, "given"))
            .spawn(|| tracing::info!("inherit: given"))
            .unwrap();
        let none = spindle::fiber::Builder::new()
            .instrument(tracing::Span::none())
            .spawn(|| tracing::info!("inherit: none"))
            .unwrap();
        child.join().unwrap();
        given.join().unwrap();
        none.join().unwrap();
    });
    let scope = |m: &str| events(m).pop().expect(m).scope;
    assert_eq!(scope("inherit: block_on body"), vec!["outer{}"]);
    assert_eq!(scope("inherit: child"), vec!["outer{}", "parent{}"]);
    assert_eq!(scope("inherit: grandchild"), vec!["outer{}", "parent{}"]);
    assert_eq!(scope("inherit: given"), vec!["given{}"]);
    assert!(scope("inherit: none").is_empty());
}

/// On a local runtime the worker is the thread in `block_on`, inside the caller's span: a
/// fiber that runs in no span does not see it, and the caller has it back afterwards.
#[test]
fn a_local_runtimes_fibers_do_not_see_the_callers_span() {
    records();
    let rt = spindle::Builder::new().build_local().unwrap();
    let caller = tracing::info_span!("caller");
    let _c = caller.enter();
    rt.block_on(|| {
        let bare = spindle::fiber::Builder::new()
            .instrument(tracing::Span::none())
            .spawn(|| {
                spindle::yield_now();
                tracing::info!("local: bare fiber");
            })
            .unwrap();
        spindle::yield_now();
        tracing::info!("local: body");
        bare.join().unwrap();
    });
    tracing::info!("local: after block_on");
    assert!(events("local: bare fiber")[0].scope.is_empty());
    assert_eq!(events("local: body")[0].scope, vec!["caller{}"]);
    assert_eq!(events("local: after block_on")[0].scope, vec!["caller{}"]);
}

/// A fiber that leaks an entered span (a forgotten guard) takes it with it when it ends.
#[test]
fn a_span_left_entered_by_a_finished_fiber_does_not_leak() {
    records();
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        spindle::fiber::Builder::new()
            .instrument(tracing::Span::none())
            .spawn(|| std::mem::forget(tracing::info_span!("forgotten").entered()))
            .unwrap()
            .join()
            .unwrap();
        spindle::fiber::Builder::new()
            .instrument(tracing::Span::none())
            .spawn(|| tracing::info!("forgotten: next fiber"))
            .unwrap()
            .join()
            .unwrap();
    });
    assert!(events("forgotten: next fiber")[0].scope.is_empty());
}

/// Async tasks keep their `Instrument` spans, and a fiber parked meanwhile does not lend them
/// its own.
#[test]
fn tasks_keep_their_instrumented_spans_beside_fibers() {
    use tracing::Instrument;
    records();
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        let fiber = spindle::spawn(|| {
            let _s = tracing::info_span!("fiber_span").entered();
            spindle::time::sleep(Duration::from_millis(10));
            tracing::info!("mixed: fiber");
        });
        let task = spindle::task::spawn_async(
            async {
                spindle::time::sleep_future(Duration::from_millis(2)).await;
                tracing::info!("mixed: task");
            }
            .instrument(tracing::info_span!("task_span")),
        );
        task.join().unwrap();
        fiber.join().unwrap();
    });
    assert_eq!(events("mixed: task")[0].scope, vec!["task_span{}"]);
    assert_eq!(events("mixed: fiber")[0].scope, vec!["fiber_span{}"]);
}

/// The runtime's own events: a named fiber's spawn, park (with its reason) and wake-up.
#[test]
fn the_runtime_reports_spawns_parks_and_wake_ups() {
    let records = records();
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let id = rt.block_on(|| {
        let h = spindle::fiber::Builder::new()
            .name("traced-sleeper")
            .spawn(|| spindle::time::sleep(Duration::from_millis(1)))
            .unwrap();
        let id = h.id().as_u64();
        h.join().unwrap();
        id
    });
    let mine: Vec<Record> = records
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.target == "spindle::fiber" && r.fields.contains(&format!("fiber_id={id}")))
        .cloned()
        .collect();
    let messages: Vec<&str> = mine.iter().map(|r| r.message.as_str()).collect();
    assert_eq!(messages, ["fiber spawned", "fiber parked", "fiber woken"], "{mine:?}");
    assert!(mine[0].fields.contains("fiber_name=traced-sleeper"), "{:?}", mine[0]);
    assert!(mine[1].fields.contains("waiting_on=sleep"), "{:?}", mine[1]);
}

/// Six nested spans across parks (more than the four kept without an allocation) come back
/// in their order.
#[test]
fn deep_span_stacks_come_back_in_order() {
    records();
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        let deep = spindle::fiber::Builder::new()
            .instrument(tracing::Span::none())
            .spawn(|| {
                let spans: Vec<_> =
                    (0..6).map(|depth| tracing::info_span!("level", depth).entered()).collect();
                spindle::yield_now();
                spindle::time::sleep(Duration::from_millis(1));
                tracing::info!("deep: inside");
                drop(spans);
            })
            .unwrap();
        let other = spindle::fiber::Builder::new()
            .instrument(tracing::Span::none())
            .spawn(|| {
                spindle::yield_now();
                tracing::info!("deep: other");
            })
            .unwrap();
        deep.join().unwrap();
        other.join().unwrap();
    });
    let expected: Vec<String> = (0..6).map(|d| format!("level{{depth={d}}}")).collect();
    assert_eq!(events("deep: inside")[0].scope, expected);
    assert!(events("deep: other")[0].scope.is_empty());
}
