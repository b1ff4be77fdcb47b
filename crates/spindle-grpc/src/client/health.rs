//! Client-side health checking (`grpc.health.v1`, opt-in per channel:
//! [`BalancedBuilder::health_check`](super::BalancedBuilder::health_check)), as grpc-go's
//! `healthCheckConfig`: each server of a [`BalancedChannel`](super::BalancedChannel) is
//! watched through `grpc.health.v1.Health/Watch` for the configured service, and a server that
//! reports `NOT_SERVING` (or `SERVICE_UNKNOWN`) is left out of the picks until it reports
//! `SERVING` again.
//!
//! # Invariants
//!
//! - **One watch per server, ended with it.** A child's watch is an async task on the child's
//!   runtime holding a clone of the child's channel; the child aborts it when dropped (its
//!   address left the name, or the channel is gone), so a watch never keeps a connection
//!   alive on its own.
//! - **Unknown is usable.** Before the first answer, and while the watch is broken (the
//!   connection lost, the stream ended), the server's health is unknown and it may be picked:
//!   the connection's own state decides then. A server that does not implement the health
//!   service (`UNIMPLEMENTED`) is served as healthy, and not asked again (grpc-go does the
//!   same).
//! - **Never all.** When every server is left out (by health or ejection), the picks ignore
//!   both (module `balance`).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tonic::Code;

use super::remote_channel::RemoteChannel;

/// What a server reported last (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    Unknown = 0,
    Serving = 1,
    NotServing = 2,
}

/// A child's health, written by its watch, read by the picks.
#[derive(Debug, Default)]
pub(crate) struct HealthState(AtomicU8);

impl HealthState {
    pub(crate) fn get(&self) -> Health {
        match self.0.load(Ordering::Relaxed) {
            1 => Health::Serving,
            2 => Health::NotServing,
            _ => Health::Unknown,
        }
    }

    fn set(&self, health: Health) {
        self.0.store(health as u8, Ordering::Relaxed);
    }
}

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse` (`status`: 0 UNKNOWN, 1 SERVING, 2 NOT_SERVING,
/// 3 SERVICE_UNKNOWN).
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// A child's watch: aborted when dropped (module docs, "one watch per server").
#[derive(Debug)]
pub(crate) struct HealthWatch {
    pub(crate) state: Arc<HealthState>,
    task: Option<spindle::task::JoinHandle<()>>,
}

impl Drop for HealthWatch {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl HealthWatch {
    /// Starts watching `service` on `channel`'s server, on `handle`'s runtime. A runtime that
    /// has shut down leaves the health unknown (usable).
    pub(crate) fn start(channel: RemoteChannel, service: String, handle: &spindle::Handle) -> HealthWatch {
        let state = Arc::new(HealthState::default());
        let task = handle.try_spawn_async(watch(channel, service, Arc::downgrade(&state))).ok();
        HealthWatch { state, task }
    }
}

/// How long a broken watch waits before the next one.
const RETRY: Duration = Duration::from_secs(1);

async fn watch(channel: RemoteChannel, service: String, state: Weak<HealthState>) {
    let path = http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Watch");
    loop {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        if grpc.ready().await.is_ok() {
            let request = tonic::Request::new(HealthCheckRequest { service: service.clone() });
            let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
            match grpc.server_streaming(request, path.clone(), codec).await {
                Err(status) if status.code() == Code::Unimplemented => {
                    if let Some(state) = state.upgrade() {
                        state.set(Health::Serving);
                    }
                    return;
                }
                Err(_) => {}
                Ok(response) => {
                    let mut stream = response.into_inner();
                    while let Ok(Some(answer)) = stream.message().await {
                        let Some(state) = state.upgrade() else { return };
                        state.set(if answer.status == 1 { Health::Serving } else { Health::NotServing });
                    }
                }
            }
        }
        // The watch broke: unknown until the next answer.
        match state.upgrade() {
            Some(state) => state.set(Health::Unknown),
            None => return,
        }
        spindle::time::sleep_future(RETRY).await;
    }
}
