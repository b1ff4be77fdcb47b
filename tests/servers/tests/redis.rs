//! The sync `redis` crate (plain `std::net` sockets inside) in many fibers of a two-worker
//! spindle runtime with the `hook` feature, against a real redis-server started for each test:
//! every fiber's blocking call parks only that fiber.

mod support;

use std::sync::Arc;

use support::{on_runtime, wait_until, InFlight, WORKERS};
use test_servers::Redis;

fn start() -> Redis {
    Redis::start().unwrap_or_else(|e| panic!("these tests need a real redis-server: {e}"))
}

fn connect(url: &str) -> redis::Connection {
    redis::Client::open(url).and_then(|c| c.get_connection()).expect("a connection to redis-server")
}

/// The server's count of clients blocked in a command (`INFO clients`).
fn blocked_clients(con: &mut redis::Connection) -> usize {
    let info: String = redis::cmd("INFO").arg("clients").query(con).expect("INFO clients");
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO clients has blocked_clients")
}

#[test]
fn two_hundred_fibers_wait_in_blpop_at_once() {
    // 200 fibers, each with its own connection, block in BLPOP on a list of their own; the
    // lists are filled only once the server counts all 200 blocked. A worker blocked in one
    // BLPOP would stop the fibers behind it from ever sending theirs.
    const N: usize = 200;
    let redis = start();
    let url = redis.url();
    let in_flight = Arc::new(InFlight::default());
    let counted = in_flight.clone();
    let answers = on_runtime(WORKERS, move || {
        let fibers: Vec<_> = (0..N)
            .map(|i| {
                let (url, in_flight) = (url.clone(), counted.clone());
                spindle::spawn(move || {
                    let mut con = connect(&url);
                    let _call = in_flight.enter();
                    let (list, value): (String, String) =
                        redis::cmd("BLPOP").arg(format!("list:{i}")).arg(0).query(&mut con).expect("BLPOP");
                    assert_eq!(list, format!("list:{i}"));
                    let _: () =
                        redis::cmd("SET").arg(format!("key:{i}")).arg(&value).query(&mut con).unwrap();
                    let back: String = redis::cmd("GET").arg(format!("key:{i}")).query(&mut con).unwrap();
                    (value, back)
                })
            })
            .collect();
        let mut control = connect(&url);
        wait_until(|| blocked_clients(&mut control) == N);
        for i in 0..N {
            let _: usize = redis::cmd("RPUSH")
                .arg(format!("list:{i}"))
                .arg(format!("value {i}"))
                .query(&mut control)
                .unwrap();
        }
        fibers.into_iter().map(|f| f.join().expect("a client fiber panicked")).collect::<Vec<_>>()
    });
    for (i, (value, back)) in answers.iter().enumerate() {
        assert_eq!(value, &format!("value {i}"));
        assert_eq!(back, value, "GET answers what SET stored");
    }
    assert_eq!(in_flight.most(), N, "every fiber's BLPOP was in flight at once");
}

#[test]
fn a_timer_fiber_ticks_while_a_hundred_fibers_sit_in_blpop() {
    // The ticker (spindle's own sleep) counts the ticks it makes while all 100 clients are
    // blocked in BLPOP, and releases them after 20 such ticks: the count can only be reached
    // if the workers run the ticker while the clients wait.
    const N: usize = 100;
    const TICKS: usize = 20;
    let redis = start();
    let url = redis.url();
    let ticks_while_all_waited = on_runtime(WORKERS, move || {
        let in_flight = Arc::new(InFlight::default());
        let fibers: Vec<_> = (0..N)
            .map(|_| {
                let (url, in_flight) = (url.clone(), in_flight.clone());
                spindle::spawn(move || {
                    let mut con = connect(&url);
                    let _call = in_flight.enter();
                    let _: (String, String) =
                        redis::cmd("BLPOP").arg("release").arg(0).query(&mut con).expect("BLPOP");
                })
            })
            .collect();
        let ticker = {
            let (url, in_flight) = (url.clone(), in_flight.clone());
            spindle::spawn(move || {
                let mut ticks = 0;
                while ticks < TICKS {
                    spindle::time::sleep(std::time::Duration::from_millis(1));
                    if in_flight.now() == N {
                        ticks += 1;
                    }
                }
                let mut control = connect(&url);
                let items: Vec<usize> = (0..N).collect();
                let _: usize = redis::cmd("RPUSH").arg("release").arg(&items).query(&mut control).unwrap();
                ticks
            })
        };
        let ticks = ticker.join().unwrap();
        fibers.into_iter().for_each(|f| f.join().expect("a client fiber panicked"));
        ticks
    });
    assert_eq!(ticks_while_all_waited, TICKS);
}

#[test]
fn a_connection_the_server_closes_gives_the_crates_error() {
    // 50 fibers block in BLPOP; the server then closes every one of their connections
    // (CLIENT KILL): each BLPOP ends with the crate's error instead of waiting forever.
    const N: usize = 50;
    let redis = start();
    let url = redis.url();
    let errors = on_runtime(WORKERS, move || {
        let fibers: Vec<_> = (0..N)
            .map(|_| {
                let url = url.clone();
                spindle::spawn(move || {
                    let mut con = connect(&url);
                    redis::cmd("BLPOP").arg("never").arg(0).query::<(String, String)>(&mut con).err()
                })
            })
            .collect();
        let mut control = connect(&url);
        wait_until(|| blocked_clients(&mut control) == N);
        let killed: usize = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query(&mut control)
            .unwrap();
        assert_eq!(killed, N);
        fibers.into_iter().map(|f| f.join().expect("a client fiber panicked")).collect::<Vec<_>>()
    });
    for e in errors {
        let e = e.expect("BLPOP on a closed connection fails");
        assert!(e.is_connection_dropped() || e.is_io_error(), "a dropped connection, not {e:?}");
    }
}

#[test]
fn a_read_timeout_comes_back_as_the_crates_timeout_error() {
    // The connection's read timeout (SO_RCVTIMEO underneath) ends a BLPOP that nothing
    // answers; the other fibers' connections stay usable.
    const N: usize = 20;
    let redis = start();
    let url = redis.url();
    let outcomes = on_runtime(WORKERS, move || {
        let fibers: Vec<_> = (0..N)
            .map(|i| {
                let url = url.clone();
                spindle::spawn(move || {
                    let mut con = connect(&url);
                    con.set_read_timeout(Some(std::time::Duration::from_millis(50))).unwrap();
                    let err = redis::cmd("BLPOP")
                        .arg(format!("empty:{i}"))
                        .arg(0)
                        .query::<(String, String)>(&mut con)
                        .err();
                    let mut fresh = connect(&url);
                    let pong: String = redis::cmd("PING").query(&mut fresh).unwrap();
                    (err, pong)
                })
            })
            .collect();
        fibers.into_iter().map(|f| f.join().expect("a client fiber panicked")).collect::<Vec<_>>()
    });
    for (err, pong) in outcomes {
        let err = err.expect("BLPOP with nothing to pop times out");
        assert!(err.is_timeout(), "the crate's timeout error, not {err:?}");
        assert_eq!(pong, "PONG");
    }
}
