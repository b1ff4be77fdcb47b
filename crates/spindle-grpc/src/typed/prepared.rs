//! A typed call ready for the server's side ([`Prepared`]): its request taken apart, its
//! limits and deadline known, and the server's side of its start (the service's wrappers, the
//! request's size, the trait method's future) run where the call will be driven: in the
//! caller's call on a worker (module `client`), else in a pump task (module `pump`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use tonic::metadata::MetadataMap;
use tonic::{Extensions, Status};

use super::dispatch::Call;
use super::driver::Driver;
use super::entry::Entry;
use crate::channel::call_state::{CallState, End, LiveCall};
use crate::limit::TypedLimits;
use crate::status::panicked;

/// A typed call ready for the server's side: its request taken apart, its limits and deadline
/// known.
pub(crate) struct Prepared<X> {
    /// The entry's index of the method.
    pub(super) index: usize,
    pub(super) metadata: MetadataMap,
    pub(super) extensions: Extensions,
    pub(super) message: X,
    pub(super) limits: TypedLimits,
    pub(super) deadline: Option<Instant>,
    /// The request stream's call state (client and bidirectional streaming methods).
    pub(super) upload: Option<Arc<CallState>>,
}

impl<X: Send + 'static> Prepared<X> {
    /// Runs the server's side of the start (its wrappers, the size check, the trait method's
    /// future) and gives the handler to a driver. Runs on the worker that drives the call.
    pub(super) fn dispatch(self, entry: &Entry, live: Option<LiveCall>) -> Result<Driver, Status> {
        let mut slot = Some(self.message);
        let call = Call::new(self.metadata, self.extensions, &mut slot, self.limits, self.upload.clone());
        let handler = match catch_unwind(AssertUnwindSafe(|| entry.dispatch().call(self.index, call))) {
            Ok(Ok(handler)) => handler,
            Ok(Err(status)) => return Err(status),
            Err(payload) => return Err(panicked(&*payload)),
        };
        let deadline = self.deadline.map(spindle::time::sleep_until_future);
        Ok(Driver::new(handler, deadline, End::with_state(self.upload, live)))
    }
}
