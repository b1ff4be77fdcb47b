//! DNS off the worker: a lookup runs on the blocking pool (a ticker fiber on the same single
//! worker keeps ticking while a lookup that never answers times out), the cache, IP literals,
//! and connecting by host name from fibers and tasks.

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use spindle::net::dns::Resolver;
use spindle::net::{TcpListener, TcpStream};
use spindle::{Builder, Runtime};

fn one_worker() -> Runtime {
    Builder::new().worker_threads(1).build().unwrap()
}

/// A ticker fiber shares the only worker with a fiber whose lookup never answers. The lookup
/// function itself watches the ticker: it sees it advance only if it runs off the worker. The
/// caller gets `TimedOut`, the ticker keeps going afterwards.
#[test]
fn a_never_answering_lookup_times_out_while_a_ticker_on_the_same_worker_ticks() {
    let rt = one_worker();
    let ticks = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (seen_tx, seen_rx) = mpsc::channel::<(bool, String)>();
    // Released when the test ends, so that the stuck pool thread finishes.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let watched = ticks.clone();
    let resolver = Resolver::with_lookup(move |_host| {
        let start = watched.load(Ordering::SeqCst);
        let limit = Instant::now() + Duration::from_secs(10);
        while watched.load(Ordering::SeqCst) < start + 5 && Instant::now() < limit {
            std::thread::sleep(Duration::from_millis(1));
        }
        let name = std::thread::current().name().unwrap_or("").to_owned();
        let _ = seen_tx.send((watched.load(Ordering::SeqCst) >= start + 5, name));
        // Never answer (until the test releases it).
        let _ = release_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
        Err(io::Error::other("released"))
    })
    .timeout(Some(Duration::from_millis(300)));

    let (t, s) = (ticks.clone(), stop.clone());
    let ticker = rt.spawn(move || {
        while !s.load(Ordering::SeqCst) {
            spindle::time::sleep(Duration::from_millis(2));
            t.fetch_add(1, Ordering::SeqCst);
        }
    });
    let err = rt.block_on(move || resolver.lookup("never.answers.test")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert!(err.to_string().contains("never.answers.test"), "{err}");

    // The lookup saw the ticker advance while it was stuck, on a blocking-pool thread.
    let (ticked, thread) = seen_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(ticked, "the ticker stalled while the lookup ran");
    assert!(thread.contains("blocking"), "the lookup ran on {thread:?}, not the blocking pool");
    // And the ticker still ticks after the timeout.
    let after = ticks.load(Ordering::SeqCst);
    let limit = Instant::now() + Duration::from_secs(10);
    while ticks.load(Ordering::SeqCst) < after + 3 && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(ticks.load(Ordering::SeqCst) >= after + 3);
    stop.store(true, Ordering::SeqCst);
    ticker.join().unwrap();
    drop(release_tx);
}

#[test]
fn an_async_lookup_that_never_answers_times_out_in_a_task() {
    let rt = one_worker();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let resolver = Resolver::with_lookup(move |_| {
        let _ = release_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
        Err(io::Error::other("released"))
    })
    .timeout(Some(Duration::from_millis(50)));
    let err =
        rt.spawn_async(async move { resolver.lookup_async("never.test").await }).join().unwrap().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    drop(release_tx);
}

fn counting_resolver(calls: &Arc<AtomicUsize>) -> Resolver {
    let calls = calls.clone();
    Resolver::with_lookup(move |host| {
        calls.fetch_add(1, Ordering::SeqCst);
        match host {
            "svc.test" | "SVC.test" => Ok(vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))]),
            "empty.test" => Ok(vec![]),
            _ => Err(io::Error::new(io::ErrorKind::NotFound, "no such host")),
        }
    })
}

#[test]
fn answers_are_cached_for_their_ttl_and_failures_are_not() {
    let rt = one_worker();
    let calls = Arc::new(AtomicUsize::new(0));
    let resolver = counting_resolver(&calls);
    let r = resolver.clone();
    rt.block_on(move || {
        assert_eq!(r.lookup("svc.test").unwrap(), vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))]);
        assert_eq!(r.lookup("SVC.test").unwrap().len(), 1); // case-insensitive hit
        assert!(r.lookup("missing.test").is_err());
        assert!(r.lookup("missing.test").is_err());
        assert_eq!(r.lookup("empty.test").unwrap_err().kind(), io::ErrorKind::NotFound);
    });
    assert_eq!(calls.load(Ordering::SeqCst), 4, "one lookup for the cached name, two for the failing one");

    let calls = Arc::new(AtomicUsize::new(0));
    let uncached = counting_resolver(&calls).ttl(Duration::ZERO);
    rt.block_on(move || {
        uncached.lookup("svc.test").unwrap();
        uncached.lookup("svc.test").unwrap();
    });
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // A TTL too long for an `Instant` keeps the name for good (no overflow panic).
    let calls = Arc::new(AtomicUsize::new(0));
    let for_good = counting_resolver(&calls).ttl(Duration::MAX);
    rt.block_on(move || {
        for_good.lookup("svc.test").unwrap();
        for_good.lookup("svc.test").unwrap();
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_full_cache_stays_within_its_capacity() {
    let rt = one_worker();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let resolver = Resolver::with_lookup(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
    })
    .capacity(2);
    rt.block_on(move || {
        for name in ["a.test", "b.test", "c.test", "c.test"] {
            resolver.lookup(name).unwrap();
        }
    });
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn ip_literals_never_reach_the_lookup() {
    let calls = Arc::new(AtomicUsize::new(0));
    let resolver = counting_resolver(&calls);
    let rt = one_worker();
    rt.block_on(move || {
        assert_eq!(resolver.lookup("127.0.0.1").unwrap(), vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        assert_eq!(resolver.lookup("[::1]").unwrap(), vec!["::1".parse::<IpAddr>().unwrap()]);
    });
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[test]
fn connect_by_host_name_from_a_fiber_and_a_task() {
    let rt = Runtime::new().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = rt.spawn(move || {
        for _ in 0..2 {
            listener.accept().unwrap();
        }
    });
    let from_fiber =
        rt.block_on(move || TcpStream::connect(("localhost", port)).map(|s| s.peer_addr().unwrap()));
    // `localhost` may resolve to ::1 first, where nothing listens: connect tries each address.
    assert_eq!(from_fiber.unwrap().port(), port);
    let host = format!("localhost:{port}");
    let from_task =
        rt.spawn_async(async move { TcpStream::connect_async(host.as_str()).await }).join().unwrap();
    assert_eq!(from_task.unwrap().peer_addr().unwrap().port(), port);
    server.join().unwrap();
}

#[test]
fn lookup_host_on_a_plain_thread_resolves_inline() {
    let addrs = spindle::net::lookup_host("localhost:80").unwrap();
    assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 80), "{addrs:?}");
}

#[test]
fn a_blocking_lookup_from_a_task_panics_naming_lookup_async() {
    let rt = one_worker();
    let resolver = Resolver::with_lookup(|_| Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]));
    let err = rt.spawn_async(async move { resolver.lookup("svc.test") }).join().unwrap_err();
    let err = err.into_panic();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("lookup_async"), "{msg}");
}

/// 100 tasks look one name up while its lookup is held back: they all join one flight, so
/// the lookup function runs once (without single-flight it would run 100 times).
#[test]
fn concurrent_lookups_of_one_name_share_one_job() {
    let rt = Builder::new().worker_threads(2).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let c = calls.clone();
    let resolver = Resolver::with_lookup(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        let _ = release_rx.lock().unwrap().recv_timeout(Duration::from_secs(20));
        Ok(vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9))])
    });
    let asked = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (r, asked) = (resolver.clone(), asked.clone());
            rt.spawn_async(async move {
                let lookup = r.lookup_async("crawled.test");
                asked.fetch_add(1, Ordering::SeqCst);
                lookup.await
            })
        })
        .collect();
    let limit = Instant::now() + Duration::from_secs(20);
    while asked.load(Ordering::SeqCst) < 100 && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Give every task its first poll (they are all in flight or about to join it).
    std::thread::sleep(Duration::from_millis(20));
    release_tx.send(()).unwrap();
    for t in tasks {
        assert_eq!(t.join().unwrap().unwrap(), vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9))]);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// A lookup that panics fails every caller that joined it with an error, and the next
/// lookup of the name starts afresh.
#[test]
fn a_panicking_lookup_fails_its_callers_and_is_retried() {
    let rt = one_worker();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let resolver = Resolver::with_lookup(move |_| {
        if c.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("resolver bug");
        }
        Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
    });
    let r = resolver.clone();
    let first = rt.block_on(move || r.lookup("flaky.test"));
    let err = first.unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err}");
    let second = rt.block_on(move || resolver.lookup("flaky.test"));
    assert_eq!(second.unwrap(), vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
}
