//! The blocking suite's clients written with the sync crates (`postgres`, `redis`, `ureq`):
//! one closure per client, which the thread mode runs on an OS thread and spindle's program
//! (`blocking-spindle` includes this file with `#[path]`) in a fiber. Each connects, counts
//! itself connected, waits for the start, and loops the case's operation until the case stops; an error or a panic
//! becomes the case's failure.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::harness::{Case, Kind, Shared, HELLO, REDIS_VALUE, SELECT1, SLEEP};

/// What the clients of one case share (one ureq agent, as the async peers share one HTTP
/// client: a pool with room for every client's connection).
#[derive(Clone)]
pub struct Common {
    agent: Option<ureq::Agent>,
}

pub fn common(case: &Case) -> Common {
    let agent = (case.kind == Kind::Http).then(|| {
        ureq::Agent::config_builder()
            .max_idle_connections(case.clients)
            .max_idle_connections_per_host(case.clients)
            .build()
            .into()
    });
    Common { agent }
}

/// The closure of client `index`.
pub fn client(
    case: &Case,
    index: usize,
    common: &Common,
    shared: Arc<Shared>,
) -> impl FnOnce() + Send + 'static {
    let (case, common) = (case.clone(), common.clone());
    move || {
        let outcome = catch_unwind(AssertUnwindSafe(|| match case.kind {
            Kind::PgSelect1 => postgres_loop(&case, SELECT1, &shared),
            Kind::PgSleep => postgres_loop(&case, SLEEP, &shared),
            Kind::Redis => redis_loop(&case, index, &shared),
            Kind::Http => http_loop(&case, common.agent.as_ref().expect("an agent"), &shared),
        }));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => shared.fail(e),
            Err(panic) => shared.fail(format!("a client panicked: {}", panic_message(&*panic))),
        }
    }
}

pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

fn postgres_loop(case: &Case, sql: &str, shared: &Shared) -> Result<(), String> {
    let mut client =
        postgres::Client::connect(&case.url, postgres::NoTls).map_err(|e| format!("connect: {e}"))?;
    let statement = client.prepare(sql).map_err(|e| format!("prepare: {e}"))?;
    shared.connected();
    shared.wait_start();
    while !shared.stopped() {
        let rows = client.query(&statement, &[]).map_err(|e| format!("{sql}: {e}"))?;
        if case.kind == Kind::PgSelect1 && rows.first().map(|r| r.get::<_, i32>(0)) != Some(1) {
            return Err("SELECT 1 did not answer 1".into());
        }
        shared.add(1);
    }
    Ok(())
}

fn redis_loop(case: &Case, index: usize, shared: &Shared) -> Result<(), String> {
    let mut con = redis::Client::open(case.url.as_str())
        .and_then(|c| c.get_connection())
        .map_err(|e| format!("connect: {e}"))?;
    let key = format!("bench:{index}");
    shared.connected();
    shared.wait_start();
    while !shared.stopped() {
        redis::cmd("SET")
            .arg(&key)
            .arg(REDIS_VALUE)
            .query::<()>(&mut con)
            .map_err(|e| format!("SET: {e}"))?;
        let back: String = redis::cmd("GET").arg(&key).query(&mut con).map_err(|e| format!("GET: {e}"))?;
        if back != REDIS_VALUE {
            return Err("GET did not answer the value SET stored".into());
        }
        shared.add(2);
    }
    Ok(())
}

fn http_loop(case: &Case, agent: &ureq::Agent, shared: &Shared) -> Result<(), String> {
    let get = || -> Result<(), String> {
        let mut res = agent.get(&case.url).call().map_err(|e| format!("GET: {e}"))?;
        let body = res.body_mut().read_to_string().map_err(|e| format!("body: {e}"))?;
        if body != HELLO {
            return Err(format!("GET / answered {body:?}"));
        }
        Ok(())
    };
    // The first request opens the connection.
    get()?;
    shared.connected();
    shared.wait_start();
    while !shared.stopped() {
        get()?;
        shared.add(1);
    }
    Ok(())
}
