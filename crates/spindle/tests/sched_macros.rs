//! `#[spindle::test]` / `#[spindle::main]` and `Runtime::block_on` with closures and futures.

use std::time::Duration;

#[spindle::test]
fn a_blocking_test_body_runs_in_a_fiber() {
    assert!(spindle::fiber::try_current().is_some());
    spindle::time::sleep(Duration::from_millis(1));
}

#[spindle::test(worker_threads = 2)]
async fn an_async_test_body_is_awaited() {
    spindle::task::yield_now().await;
    spindle::time::sleep_future(Duration::from_millis(1)).await;
}

/// The local flavour: the test's own thread runs the body and what it spawns.
#[spindle::test(flavor = "local")]
fn a_local_test_runs_on_the_test_thread() {
    let me = std::thread::current().id();
    assert_eq!(spindle::spawn(|| std::thread::current().id()).join().unwrap(), me);
}

#[spindle::test(flavor = "current_thread")]
async fn current_thread_is_the_local_flavour() {
    let me = std::thread::current().id();
    assert_eq!(spindle::spawn(|| std::thread::current().id()).await.unwrap(), me);
}

#[spindle::test]
fn a_test_may_return_a_result() -> Result<(), String> {
    let (tx, rx) = spindle::sync::channel(1);
    tx.send(1).map_err(|e| e.to_string())?;
    assert_eq!(rx.recv(), Ok(1));
    Ok(())
}

#[test]
fn block_on_takes_closures_and_futures() {
    let rt = spindle::Runtime::new().unwrap();
    assert_eq!(rt.block_on(|| 2), 2);
    let (tx, rx) = spindle::sync::channel(1);
    let got = rt.block_on(async move {
        spindle::spawn(move || tx.send(5).unwrap());
        rx.recv_async().await.unwrap()
    });
    assert_eq!(got, 5);
}

mod main_macro {
    #[spindle::main(worker_threads = 1)]
    pub fn main() -> usize {
        spindle::spawn(|| 7).join().unwrap()
    }

    #[test]
    fn main_runs_its_body_on_a_runtime() {
        assert_eq!(main(), 7);
    }
}
