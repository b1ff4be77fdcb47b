//! `select!` and `select_async!`: the first ready branch wins, `default` never waits, timers
//! and joins are branches, choice is fair, and losing branches lose no message under
//! contention (every value sent is received exactly once).

use std::time::Duration;

use spindle::sync::{channel, oneshot};

#[test]
fn the_ready_branch_wins_and_default_does_not_wait() {
    let rt = spindle::Runtime::new().unwrap();
    rt.block_on(|| {
        let (tx1, rx1) = channel::<u32>(1);
        let (tx2, rx2) = channel::<u32>(1);
        tx2.send(2).unwrap();
        let got = spindle::select! {
            v = rx1.recv_async() => (1, v.unwrap()),
            v = rx2.recv_async() => (2, v.unwrap()),
        };
        assert_eq!(got, (2, 2));
        let none = spindle::select! {
            v = rx1.recv_async() => Some(v),
            default => None,
        };
        assert_eq!(none, None);
        tx1.send(1).unwrap();
        let some = spindle::select! {
            v = rx1.recv_async() => Some(v.unwrap()),
            default => None,
        };
        assert_eq!(some, Some(1));
        drop(tx2);
    });
}

#[test]
fn timers_joins_and_sends_are_branches() {
    let rt = spindle::Runtime::new().unwrap();
    rt.block_on(|| {
        let (_tx, rx) = channel::<u32>(1);
        let timed_out = spindle::select! {
            _ = rx.recv_async() => false,
            _ = spindle::time::sleep_future(Duration::from_millis(5)) => true,
        };
        assert!(timed_out);

        let fiber = spindle::spawn(|| 40 + 2);
        let joined = spindle::select! {
            r = fiber => r.unwrap(),
            _ = spindle::time::sleep_future(Duration::from_secs(30)) => 0,
        };
        assert_eq!(joined, 42);

        let (full_tx, full_rx) = channel::<u32>(1);
        full_tx.send(1).unwrap();
        let (otx, orx) = oneshot::<&str>();
        otx.send("oneshot").unwrap();
        let which = spindle::select! {
            _ = full_tx.send_async(2) => "send",
            v = orx => v.unwrap(),
        };
        assert_eq!(which, "oneshot");
        assert_eq!(full_rx.recv(), Ok(1));
        assert!(full_rx.is_empty(), "the losing send must not have sent");
    });
}

#[test]
#[should_panic(expected = "every branch is disabled")]
fn a_select_with_every_branch_disabled_panics_instead_of_hanging() {
    let (_tx, rx) = channel::<u32>(1);
    spindle::select! {
        _ = rx.recv_async(), if false => {},
    }
}

#[test]
fn select_is_fair_between_always_ready_branches() {
    let rt = spindle::Runtime::new().unwrap();
    let (a, b) = rt.block_on(|| {
        let (tx1, rx1) = channel::<()>(1);
        let (tx2, rx2) = channel::<()>(1);
        let (mut a, mut b) = (0, 0);
        for _ in 0..2000 {
            let _ = tx1.try_send(());
            let _ = tx2.try_send(());
            spindle::select! {
                _ = rx1.recv_async() => a += 1,
                _ = rx2.recv_async() => b += 1,
            }
        }
        (a, b)
    });
    assert_eq!(a + b, 2000);
    // Both always ready: a fair choice takes each about half the time; far from 0.
    assert!(a > 500 && b > 500, "unfair select: {a} vs {b}");
}

#[test]
fn losing_branches_lose_no_message_under_contention() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    const PER_PRODUCER: u64 = 500;
    let (sum, count) = rt.block_on(|| {
        let (tx1, rx1) = channel::<u64>(2);
        let (tx2, rx2) = channel::<u64>(2);
        let mut producers = Vec::new();
        for p in 0..4u64 {
            let tx = if p % 2 == 0 { tx1.clone() } else { tx2.clone() };
            producers.push(spindle::spawn(move || {
                for i in 0..PER_PRODUCER {
                    tx.send(p * PER_PRODUCER + i + 1).unwrap();
                }
            }));
        }
        drop((tx1, tx2));
        let (out_tx, out_rx) = channel::<(u64, u64)>(8);
        for c in 0..6 {
            let (rx1, rx2, out_tx) = (rx1.clone(), rx2.clone(), out_tx.clone());
            if c % 2 == 0 {
                spindle::spawn(move || {
                let (mut sum, mut n) = (0, 0);
                let (mut open1, mut open2) = (true, true);
                while open1 || open2 {
                    spindle::select! {
                        v = rx1.recv_async(), if open1 => match v { Ok(v) => { sum += v; n += 1 } Err(_) => open1 = false },
                        v = rx2.recv_async(), if open2 => match v { Ok(v) => { sum += v; n += 1 } Err(_) => open2 = false },
                        _ = spindle::time::sleep_future(Duration::from_micros(300)) => {},
                    }
                }
                out_tx.send((sum, n)).unwrap();
                });
            } else {
                // Half the consumers are async tasks using select_async!.
                spindle::task::spawn_async(async move {
                    let (mut sum, mut n) = (0, 0);
                    let (mut open1, mut open2) = (true, true);
                    while open1 || open2 {
                        spindle::select_async! {
                            v = rx1.recv_async(), if open1 => match v { Ok(v) => { sum += v; n += 1 } Err(_) => open1 = false },
                            v = rx2.recv_async(), if open2 => match v { Ok(v) => { sum += v; n += 1 } Err(_) => open2 = false },
                        }
                    }
                    out_tx.send_async((sum, n)).await.unwrap();
                });
            }
        }
        drop(out_tx);
        producers.into_iter().for_each(|p| p.join().unwrap());
        out_rx.iter().fold((0, 0), |(s, n), (s2, n2)| (s + s2, n + n2))
    });
    let total = 4 * PER_PRODUCER;
    assert_eq!(count, total);
    assert_eq!(sum, total * (total + 1) / 2);
}

#[test]
fn blocking_select_in_a_task_panics_pointing_to_select_async() {
    let rt = spindle::Runtime::new().unwrap();
    let (_tx, rx) = channel::<u32>(1);
    let err = rt
        .spawn_async(async move {
            // (With a `default` branch it would not block, and is allowed.)
            spindle::select! {
                _ = rx.recv_async() => {},
            }
        })
        .join()
        .unwrap_err();
    let err = err.into_panic();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("select_async!"), "{msg}");
}

#[test]
fn a_biased_select_takes_the_first_ready_branch_every_time() {
    let rt = spindle::Runtime::new().unwrap();
    rt.block_on(|| {
        let (hi_tx, hi_rx) = channel::<u32>(64);
        let (lo_tx, lo_rx) = channel::<u32>(64);
        for i in 0..32 {
            hi_tx.send(i).unwrap();
            lo_tx.send(i).unwrap();
        }
        // Both always ready: every round takes the high-priority branch while it has values.
        let mut order = Vec::new();
        for _ in 0..40 {
            let got = spindle::select! {
                biased;
                v = hi_rx.recv_async() => ("hi", v.unwrap()),
                v = lo_rx.recv_async() => ("lo", v.unwrap()),
            };
            order.push(got.0);
        }
        assert!(order[..32].iter().all(|b| *b == "hi"));
        assert!(order[32..].iter().all(|b| *b == "lo"));
        // With `default`, and in async code.
        let polled = spindle::select! {
            biased;
            v = hi_rx.recv_async() => v.ok(),
            default => None,
        };
        assert_eq!(polled, None);
    });
    let (a_tx, a_rx) = channel::<u8>(1);
    let (b_tx, b_rx) = channel::<u8>(1);
    a_tx.send(1).unwrap();
    b_tx.send(2).unwrap();
    let h = rt.spawn_async(async move {
        spindle::select_async! {
            biased;
            v = b_rx.recv_async() => v.unwrap(),
            v = a_rx.recv_async() => v.unwrap(),
        }
    });
    assert_eq!(h.join().unwrap(), 2);
}
