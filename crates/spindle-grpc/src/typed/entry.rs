//! What a service registers for the typed path: [`TypedService`] (a server with a typed entry
//! point), its [`Entry`] (the type-erased [`Dispatch`] and the server's codec limits) and its
//! method table ([`Method`], [`Kind`]), which the route compares with the client's (module
//! `typed`, "types are checked once, at the route"). The in-process channel keeps the entries
//! of its services (module `channel`).

use std::any::TypeId;
use std::sync::Arc;

use tonic::Status;

use super::dispatch::Call;
use super::handler::BoxHandler;
use crate::limit::{TONIC_MAX_DECODING, TONIC_MAX_ENCODING};

/// A server with a typed entry point: tonic's generated servers, with the code
/// `spindle-grpc-build` adds to them, and wrappers that keep the typed path
/// ([`Intercepted`](super::Intercepted)).
/// Register one with [`crate::Channel::add_typed_service`].
pub trait TypedService {
    /// The typed entry point of this server, with its codec limits.
    fn typed_entry(&self) -> Entry;
}

/// The kind of a method: which sides stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One request, one response.
    Unary,
    /// One request, a stream of responses.
    ServerStreaming,
    /// A stream of requests, one response.
    ClientStreaming,
    /// Streams both ways.
    Streaming,
}

/// One method of a service, as the generated client and server both list it: the route
/// compares the two lists, so that messages cross only between matching types.
#[derive(Debug, Clone, Copy)]
pub struct Method {
    /// The method's name in the proto file (`UnaryCall`).
    pub name: &'static str,
    /// Which sides stream.
    pub kind: Kind,
    /// `TypeId::of` the request message.
    pub request: fn() -> TypeId,
    /// `TypeId::of` the response message.
    pub response: fn() -> TypeId,
}

impl Method {
    /// A method entry (for generated code).
    pub const fn new(
        name: &'static str,
        kind: Kind,
        request: fn() -> TypeId,
        response: fn() -> TypeId,
    ) -> Method {
        Method { name, kind, request, response }
    }

    /// The same name, kind and message types.
    pub fn matches(&self, other: &Method) -> bool {
        self.name == other.name
            && self.kind == other.kind
            && (self.request)() == (other.request)()
            && (self.response)() == (other.response)()
    }
}

/// A service's typed entry point, type-erased: the generated code implements it over the
/// service's trait; wrappers ([`Intercepted`](super::Intercepted)) implement it around another.
pub trait Dispatch: Send + Sync + 'static {
    /// The service's methods, in the order of their indices.
    fn methods(&self) -> &'static [Method];

    /// Starts the call of method `method` (an index into [`Dispatch::methods`]): the
    /// generated code hands `call` to the adapter of the method's kind ([`Call::unary`] and
    /// the others), which moves the request into the service's trait method. `Err` ends the
    /// call with that status before any handler runs.
    fn call(&self, method: usize, call: Call<'_>) -> Result<BoxHandler, Status>;
}

/// A registered typed entry: the dispatch and the server's codec limits, which the typed path
/// applies as tonic's codec would.
#[derive(Clone)]
pub struct Entry {
    dispatch: Arc<dyn Dispatch>,
    pub(super) max_decoding: usize,
    pub(super) max_encoding: usize,
}

impl Entry {
    /// An entry for `dispatch`, with the server's `max_decoding_message_size` and
    /// `max_encoding_message_size` (tonic's defaults, 4 MiB and none, when `None`).
    pub fn new(
        dispatch: impl Dispatch,
        max_decoding_message_size: Option<usize>,
        max_encoding_message_size: Option<usize>,
    ) -> Entry {
        Entry {
            dispatch: Arc::new(dispatch),
            max_decoding: max_decoding_message_size.unwrap_or(TONIC_MAX_DECODING),
            max_encoding: max_encoding_message_size.unwrap_or(TONIC_MAX_ENCODING),
        }
    }

    /// The same entry with its dispatch wrapped by `wrap` (an interceptor, a middleware).
    pub fn map<D: Dispatch>(self, wrap: impl FnOnce(Arc<dyn Dispatch>) -> D) -> Entry {
        Entry { dispatch: Arc::new(wrap(self.dispatch)), ..self }
    }

    pub(crate) fn dispatch(&self) -> &dyn Dispatch {
        &*self.dispatch
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let methods: Vec<&str> = self.dispatch.methods().iter().map(|m| m.name).collect();
        f.debug_struct("Entry")
            .field("methods", &methods)
            .field("max_decoding_message_size", &self.max_decoding)
            .field("max_encoding_message_size", &self.max_encoding)
            .finish()
    }
}
