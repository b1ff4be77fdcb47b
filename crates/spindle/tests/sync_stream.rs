//! `futures_core::Stream` on the receivers (mpmc, broadcast, watch), on a listener's
//! incoming connections and on intervals, read from async tasks.

use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use spindle::net::{TcpListener, TcpStream};
use spindle::sync::{broadcast, channel, watch};

/// The next item of a stream (what `StreamExt::next` does).
async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
}

#[test]
fn a_channel_receiver_streams_until_every_sender_is_gone() {
    let rt = spindle::Runtime::new().unwrap();
    let (tx, mut rx) = channel::<u32>(2);
    let reader = rt.spawn_async(async move {
        let mut got = vec![];
        while let Some(v) = next(&mut rx).await {
            got.push(v);
        }
        got
    });
    rt.block_on(move || (0..100).for_each(|i| tx.send(i).unwrap()));
    assert_eq!(reader.join().unwrap(), (0..100).collect::<Vec<_>>());
}

#[test]
fn two_streaming_receivers_share_the_values_and_a_dropped_one_passes_its_wake_up_on() {
    let rt = spindle::Runtime::new().unwrap();
    let (tx, rx) = channel::<u32>(1);
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut rx = rx.clone();
            rt.spawn_async(async move {
                let mut n = 0;
                while next(&mut rx).await.is_some() {
                    n += 1;
                }
                n
            })
        })
        .collect();
    // A receiver that polled once and goes away must not keep a value's wake-up.
    let mut quitter = rx.clone();
    drop(rx);
    rt.spawn_async(async move {
        let _ = spindle::time::timeout(Duration::from_millis(1), next(&mut quitter)).await;
    })
    .join()
    .unwrap();
    rt.block_on(move || (0..1000).for_each(|i| tx.send(i).unwrap()));
    let total: u32 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert_eq!(total, 1000);
}

#[test]
fn a_broadcast_receiver_streams_every_value_and_its_lag() {
    let rt = spindle::Runtime::new().unwrap();
    let (tx, mut rx) = broadcast::channel::<u32>(4);
    for i in 0..6 {
        tx.send(i).unwrap();
    }
    drop(tx);
    let got = rt
        .spawn_async(async move {
            let mut got = vec![];
            while let Some(item) = next(&mut rx).await {
                got.push(item);
            }
            got
        })
        .join()
        .unwrap();
    assert_eq!(got, [Err(broadcast::Lagged(2)), Ok(2), Ok(3), Ok(4), Ok(5)]);
}

#[test]
fn a_watch_receiver_streams_the_latest_unseen_value() {
    let rt = spindle::Runtime::new().unwrap();
    let (tx, mut rx) = watch::channel(0u32);
    let (seen_tx, seen_rx) = channel::<u32>(1);
    let reader = rt.spawn_async(async move {
        let mut got = vec![];
        while let Some(v) = next(&mut rx).await {
            got.push(v);
            seen_tx.send_async(v).await.unwrap();
        }
        got
    });
    rt.block_on(move || {
        for v in 1..=3 {
            tx.send(v).unwrap();
            assert_eq!(seen_rx.recv(), Ok(v));
        }
    });
    assert_eq!(reader.join().unwrap(), [1, 2, 3]);
}

#[test]
fn a_listeners_incoming_connections_stream() {
    let rt = spindle::Runtime::new().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn_async(async move {
        let mut incoming = listener.incoming();
        let mut peers = vec![];
        for _ in 0..3 {
            peers.push(next(&mut incoming).await.unwrap().unwrap().peer_addr().unwrap());
        }
        peers
    });
    let clients = rt.block_on(move || (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect::<Vec<_>>());
    let mut peers = server.join().unwrap();
    let mut locals: Vec<_> = clients.iter().map(|c| c.local_addr().unwrap()).collect();
    peers.sort();
    locals.sort();
    assert_eq!(peers, locals);
}

#[test]
fn receivers_stay_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<spindle::sync::Receiver<u32>>();
    send_sync::<broadcast::Receiver<u32>>();
    send_sync::<watch::Receiver<u32>>();
    send_sync::<spindle::sync::CancellationToken>();
    send_sync::<spindle::time::Interval>();
    fn send<T: Send>() {}
    send::<spindle::task::JoinSet<u32>>();
}
