//! The blocking suite's tokio clients: a task per client on tokio's default multi-thread
//! runtime, with the async crates (`tokio-postgres`, `redis` with `tokio-comp`, `reqwest`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Case, Kind, Shared, HELLO, REDIS_VALUE, SELECT1, SLEEP};

/// Runs the case's clients until the case stops.
pub fn run(case: &Case, shared: Arc<Shared>) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let case = case.clone();
    rt.block_on(async move {
        let http = (case.kind == Kind::Http).then(|| {
            reqwest::Client::builder().pool_max_idle_per_host(case.clients).build().expect("a reqwest client")
        });
        let tasks: Vec<_> = (0..case.clients)
            .map(|i| {
                let (case, shared, http) = (case.clone(), shared.clone(), http.clone());
                tokio::spawn(async move {
                    let outcome = match case.kind {
                        Kind::PgSelect1 => postgres_loop(&case, SELECT1, &shared).await,
                        Kind::PgSleep => postgres_loop(&case, SLEEP, &shared).await,
                        Kind::Redis => redis_loop(&case, i, &shared).await,
                        Kind::Http => http_loop(&case, http.as_ref().expect("a client"), &shared).await,
                    };
                    if let Err(e) = outcome {
                        shared.fail(e);
                    }
                })
            })
            .collect();
        for task in tasks {
            if let Err(e) = task.await {
                shared.fail(format!("a client task failed: {e}"));
            }
        }
    });
}

/// Waits until every client has connected (checked every 10 ms: a tokio timer per task, no
/// thread blocked), or the case failed.
async fn wait_start(shared: &Shared) {
    while !shared.started.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn postgres_loop(case: &Case, sql: &str, shared: &Shared) -> Result<(), String> {
    let (client, connection) = tokio_postgres::connect(&case.url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let driver = tokio::spawn(connection);
    let statement = client.prepare(sql).await.map_err(|e| format!("prepare: {e}"))?;
    shared.connected();
    wait_start(shared).await;
    while !shared.stopped() {
        let rows = client.query(&statement, &[]).await.map_err(|e| format!("{sql}: {e}"))?;
        if case.kind == Kind::PgSelect1 && rows.first().map(|r| r.get::<_, i32>(0)) != Some(1) {
            return Err("SELECT 1 did not answer 1".into());
        }
        shared.add(1);
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}

async fn redis_loop(case: &Case, index: usize, shared: &Shared) -> Result<(), String> {
    let client = redis::Client::open(case.url.as_str()).map_err(|e| format!("client: {e}"))?;
    let mut con = client.get_multiplexed_async_connection().await.map_err(|e| format!("connect: {e}"))?;
    let key = format!("bench:{index}");
    shared.connected();
    wait_start(shared).await;
    while !shared.stopped() {
        redis::cmd("SET")
            .arg(&key)
            .arg(REDIS_VALUE)
            .query_async::<()>(&mut con)
            .await
            .map_err(|e| format!("SET: {e}"))?;
        let back: String =
            redis::cmd("GET").arg(&key).query_async(&mut con).await.map_err(|e| format!("GET: {e}"))?;
        if back != REDIS_VALUE {
            return Err("GET did not answer the value SET stored".into());
        }
        shared.add(2);
    }
    Ok(())
}

async fn http_loop(case: &Case, client: &reqwest::Client, shared: &Shared) -> Result<(), String> {
    let get = || async {
        let res = client.get(&case.url).send().await.map_err(|e| format!("GET: {e}"))?;
        let body = res.text().await.map_err(|e| format!("body: {e}"))?;
        if body != HELLO {
            return Err(format!("GET / answered {body:?}"));
        }
        Ok::<(), String>(())
    };
    get().await?;
    shared.connected();
    wait_start(shared).await;
    while !shared.stopped() {
        get().await?;
        shared.add(1);
    }
    Ok(())
}
