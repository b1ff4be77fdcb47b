//! [`Body`]: the request and response body type of spindle-http.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;

use crate::transport::limits::Guarded;

/// The error type of body streams: whatever the underlying body reported.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An HTTP body: a request body streamed from the connection, or a response body (empty,
/// one buffer, or any [`http_body::Body`] of [`Bytes`]).
///
/// A request body is read lazily: [`Body::bytes`] (blocking style, in a handler fiber) or
/// [`BodyExt::collect`] (async) read it to the end; a handler that returns the request body
/// as its response body streams it back (chunked when the length is unknown).
pub struct Body {
    kind: Kind,
}

enum Kind {
    Full(Option<Bytes>),
    // Boxed: the limit state would make every `Body` (and `Response<Body>`) large.
    Incoming(Box<Guarded>),
    Boxed(UnsyncBoxBody<Bytes, BoxError>),
}

impl Body {
    /// An empty body.
    pub fn empty() -> Body {
        Body { kind: Kind::Full(None) }
    }

    /// Wraps any body of [`Bytes`] (a stream, a channel-fed body, ...).
    pub fn wrap<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Body { kind: Kind::Boxed(body.map_err(Into::into).boxed_unsync()) }
    }

    pub(crate) fn guarded(body: Guarded) -> Body {
        Body { kind: Kind::Incoming(Box::new(body)) }
    }

    /// Reads the whole body into one buffer. Blocking style: in a fiber (a blocking handler)
    /// it parks the fiber while waiting for the peer; do not call it from an async handler
    /// (use [`BodyExt::collect`] there).
    pub fn bytes(self) -> Result<Bytes, BoxError> {
        if let Kind::Full(data) = self.kind {
            return Ok(data.unwrap_or_default());
        }
        Ok(spindle::task::block_on(self.collect())?.to_bytes())
    }

    /// Reads the whole body as UTF-8 text (blocking style, as [`Body::bytes`]).
    pub fn text(self) -> Result<String, BoxError> {
        let bytes = self.bytes()?;
        Ok(String::from_utf8(bytes.into())?)
    }
}

impl Body {
    /// The bytes of a body held in memory (empty or one buffer); the body itself when it
    /// is a stream.
    pub(crate) fn into_full(self) -> Result<Bytes, Body> {
        match self.kind {
            Kind::Full(data) => Ok(data.unwrap_or_default()),
            kind => Err(Body { kind }),
        }
    }

    /// The data of a body held in memory (empty or one buffer), to make the body again
    /// ([`Held::body`]); `None` for a stream, which cannot be replayed. `Sync`, unlike a
    /// `Body`, so that a request future may keep it across an await by reference.
    pub(crate) fn held(&self) -> Option<Held> {
        match &self.kind {
            Kind::Full(data) => Some(Held(data.clone())),
            _ => None,
        }
    }
}

/// A body held in memory, kept to send again (`Body::held`).
#[derive(Clone)]
pub(crate) struct Held(Option<Bytes>);

impl Held {
    pub(crate) fn body(&self) -> Body {
        Body { kind: Kind::Full(self.0.clone()) }
    }
}

impl Default for Body {
    fn default() -> Body {
        Body::empty()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Full(Some(b)) => return f.debug_tuple("Body").field(&b.len()).finish(),
            Kind::Full(None) => "empty",
            Kind::Incoming(_) => "incoming",
            Kind::Boxed(_) => "stream",
        };
        f.debug_tuple("Body").field(&kind).finish()
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().kind {
            Kind::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Kind::Incoming(body) => body.poll_frame(cx),
            Kind::Boxed(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(data) => data.is_none(),
            Kind::Incoming(body) => body.is_end_stream(),
            Kind::Boxed(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(data) => SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64)),
            Kind::Incoming(body) => body.size_hint(),
            Kind::Boxed(body) => body.size_hint(),
        }
    }
}

impl From<Bytes> for Body {
    fn from(data: Bytes) -> Body {
        if data.is_empty() {
            Body::empty()
        } else {
            Body { kind: Kind::Full(Some(data)) }
        }
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Body {
        Bytes::from_static(s.as_bytes()).into()
    }
}

impl From<&'static [u8]> for Body {
    fn from(s: &'static [u8]) -> Body {
        Bytes::from_static(s).into()
    }
}

impl From<String> for Body {
    fn from(s: String) -> Body {
        Bytes::from(s).into()
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Body {
        Bytes::from(v).into()
    }
}

impl From<()> for Body {
    fn from(_: ()) -> Body {
        Body::empty()
    }
}
