//! Rendezvous channels (`channel(0)`): a send completes only once a receiver has taken the
//! value, as Go's unbuffered channel; timed, async and abandoned sends take their value back.
//! And `Sender::closed`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::sync::{channel, SendTimeoutError, TrySendError};
use spindle::Builder;

fn paused() -> spindle::Runtime {
    Builder::new().start_paused(true).build().unwrap()
}

#[test]
fn a_send_completes_only_when_a_receiver_takes_the_value() {
    let rt = paused();
    rt.block_on(|| {
        let (tx, rx) = channel::<u32>(0);
        let sent = Arc::new(AtomicBool::new(false));
        let s = sent.clone();
        let sender = spindle::spawn(move || {
            tx.send(1).unwrap();
            s.store(true, Ordering::SeqCst);
            tx.send(2).unwrap();
        });
        // An hour passes with nobody receiving: the sender is still waiting.
        spindle::time::sleep(Duration::from_secs(3600));
        assert!(!sent.load(Ordering::SeqCst));
        assert_eq!(rx.len(), 1, "the offered value");
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert!(sent.load(Ordering::SeqCst));
        sender.join().unwrap();
        assert!(rx.recv().is_err());
    });
}

#[test]
fn many_senders_and_receivers_hand_over_every_value_once() {
    let rt = Builder::new().worker_threads(2).build().unwrap();
    let mut got = rt.block_on(|| {
        let (tx, rx) = channel::<u32>(0);
        for s in 0..8u32 {
            let tx = tx.clone();
            spindle::spawn(move || (0..250).for_each(|i| tx.send(s * 1000 + i).unwrap()));
        }
        drop(tx);
        let receivers: Vec<_> = (0..4)
            .map(|_| {
                let rx = rx.clone();
                spindle::spawn(move || rx.iter().collect::<Vec<_>>())
            })
            .collect();
        drop(rx);
        receivers.into_iter().flat_map(|r| r.join().unwrap()).collect::<Vec<_>>()
    });
    got.sort_unstable();
    let want: Vec<u32> = (0..8).flat_map(|s| (0..250).map(move |i| s * 1000 + i)).collect();
    assert_eq!(got, want);
}

#[test]
fn try_send_needs_a_waiting_receiver() {
    let rt = paused();
    rt.block_on(|| {
        let (tx, rx) = channel::<u32>(0);
        assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
        let receiver = spindle::spawn(move || rx.recv());
        spindle::yield_now(); // the receiver waits now
        assert_eq!(tx.try_send(2), Ok(()));
        assert_eq!(receiver.join().unwrap(), Ok(2));
        assert_eq!(tx.try_send(3), Err(TrySendError::Disconnected(3)));
    });
}

#[test]
fn a_timed_out_send_takes_its_value_back() {
    let rt = paused();
    rt.block_on(|| {
        let (tx, rx) = channel::<String>(0);
        let t0 = spindle::time::now();
        let got = tx.send_timeout("late".to_string(), Duration::from_secs(2));
        assert_eq!(got, Err(SendTimeoutError::Timeout("late".to_string())));
        assert_eq!(spindle::time::now() - t0, Duration::from_secs(2));
        assert!(rx.is_empty(), "nothing left in the channel");
        // The next offer goes through.
        let receiver = spindle::spawn(move || rx.recv().unwrap());
        tx.send_timeout("on time".to_string(), Duration::from_secs(2)).unwrap();
        assert_eq!(receiver.join().unwrap(), "on time");
    });
}

#[test]
fn a_send_whose_receivers_go_gets_its_value_back() {
    let rt = paused();
    rt.block_on(|| {
        let (tx, rx) = channel::<Vec<u8>>(0);
        let sender = spindle::spawn(move || tx.send(vec![1, 2, 3]));
        spindle::yield_now(); // offered, waiting for a receiver
        drop(rx);
        assert_eq!(sender.join().unwrap().unwrap_err().0, vec![1, 2, 3]);
    });
}

#[test]
fn an_aborted_sender_takes_its_offer_back() {
    let rt = paused();
    rt.block_on(|| {
        let (tx, rx) = channel::<u32>(0);
        let tx2 = tx.clone();
        let sender = spindle::spawn(move || tx2.send(1));
        spindle::yield_now();
        sender.abort();
        assert!(sender.join().unwrap_err().is_cancelled());
        assert!(rx.is_empty());
        let next = spindle::spawn(move || tx.send(2));
        assert_eq!(rx.recv(), Ok(2));
        next.join().unwrap().unwrap();
    });
}

#[test]
fn async_sends_and_a_select_on_receive() {
    let rt = paused();
    let h = rt.spawn_async(async {
        let (tx, rx) = channel::<u32>(0);
        let sender = spindle::task::spawn_async(async move {
            tx.send_async(5).await.unwrap();
            // Nobody receives for the next 2 s: this send's future is dropped at 1 s, and
            // its value is taken back.
            let dropped = spindle::time::timeout(Duration::from_secs(1), tx.send_async(6)).await;
            assert!(dropped.is_err());
            tx.send_async(7).await.unwrap();
        });
        let first = rx.recv_async().await.unwrap();
        spindle::time::sleep_future(Duration::from_secs(2)).await;
        let second = spindle::select_async! {
            v = rx.recv_async() => v.unwrap(),
            _ = spindle::time::sleep_future(Duration::from_secs(10)) => 0,
        };
        sender.await.unwrap();
        [first, second]
    });
    assert_eq!(h.join().unwrap(), [5, 7]);
}

#[test]
fn closed_waits_for_every_receiver() {
    let rt = paused();
    rt.block_on(|| {
        let (tx, rx) = channel::<u32>(4);
        let rx2 = rx.clone();
        assert!(!tx.closed_timeout(Duration::from_secs(1)));
        spindle::spawn(move || {
            spindle::time::sleep(Duration::from_secs(5));
            drop(rx);
            spindle::time::sleep(Duration::from_secs(5));
            drop(rx2);
        });
        let t0 = spindle::time::now();
        tx.closed();
        assert_eq!(spindle::time::now() - t0, Duration::from_secs(10));
        assert!(tx.is_closed());
        assert!(tx.closed_timeout(Duration::ZERO));
    });
    let (tx, rx) = channel::<u32>(1);
    let h = rt.spawn_async(async move {
        tx.closed_async().await;
        tx.is_closed()
    });
    drop(rx);
    assert!(h.join().unwrap());
}
