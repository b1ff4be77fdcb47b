//! [`ClientError`] and [`ClientErrorKind`]: what went wrong with a request.

use std::fmt;

use crate::transport::body::BoxError;

/// What went wrong with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientErrorKind {
    /// The URL is not an absolute `http://` or `https://` URL with a host; or a redirect's
    /// `Location` is not an `http://` or `https://` URL (the message names both).
    InvalidUrl,
    /// The name did not resolve or the TCP connect failed.
    Connect,
    /// The TCP connect, the TLS handshake, or the first load of the system's root
    /// certificates took longer than the connect timeout.
    ConnectTimeout,
    /// TLS: no configuration (no system root certificate found, or no `tls` feature), a bad
    /// server name, or the handshake failed (certificate...).
    Tls,
    /// No response head within the request timeout.
    RequestTimeout,
    /// No data of the response body within the read timeout (an error of the body; the
    /// connection is not reused).
    ReadTimeout,
    /// The HTTP exchange failed (connection closed, protocol error).
    Protocol,
    /// Called outside a spindle runtime (the client's connections run on its workers).
    NoRuntime,
    /// A redirect past the limit of the client's [`redirect::Policy`](crate::redirect::Policy) (a redirect loop ends
    /// here); the message names the limit and the last URLs.
    TooManyRedirects,
}

/// A client error: its kind, a message naming the target, and the underlying error if any.
#[derive(Debug)]
pub struct ClientError {
    kind: ClientErrorKind,
    message: String,
    source: Option<BoxError>,
}

impl ClientError {
    pub(crate) fn new(kind: ClientErrorKind, message: String) -> ClientError {
        ClientError { kind, message, source: None }
    }

    pub(crate) fn with_source(
        kind: ClientErrorKind,
        message: String,
        source: impl Into<BoxError>,
    ) -> ClientError {
        ClientError { kind, message, source: Some(source.into()) }
    }

    pub fn kind(&self) -> ClientErrorKind {
        self.kind
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}
