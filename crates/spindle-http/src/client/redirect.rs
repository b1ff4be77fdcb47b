//! Redirects: the client follows `301`, `302`, `303`, `307` and `308` responses that carry a
//! `Location` header, as Go's `http.Client` and reqwest do, up to the [`Policy`]'s limit
//! (10 by default; [`Policy::none`] returns every 3xx as it is).
//!
//! # Rules
//!
//! 1. **Where to.** `Location` is a URI reference resolved against the URL of the request that
//!    got it (RFC 3986 section 5, the `url` crate): an absolute URL, `//host/path`, `/path`,
//!    `path`, `?query`. Its fragment is dropped. A target that is not `http://` or `https://`
//!    (or not a URL at all) ends the chain with an [`ClientErrorKind::InvalidUrl`](crate::ClientErrorKind::InvalidUrl) error naming
//!    both URLs. A 3xx without `Location` (or of another code: 300, 304...) is the response.
//! 2. **Method and body** (RFC 9110 section 15.4, as reqwest): `303` turns every method but
//!    GET and HEAD into GET, and `301` and `302` turn POST into GET; that GET has no body, and
//!    `Content-Length`, `Content-Type` and `Transfer-Encoding` are removed. Otherwise (`307`,
//!    `308`, and `301`/`302` of a method other than POST) the method and body go again, which
//!    takes a body held in memory (empty, bytes, a string...): a request
//!    with a streamed body ([`Body::wrap`]) ends the chain there, and the 3xx is the response.
//! 3. **Headers** go on, but `Authorization`, `Cookie`, `Proxy-Authorization` and
//!    `WWW-Authenticate` are removed (for the rest of the chain) when a redirect changes the
//!    host or the port, or goes from `https` to `http`: the same host keeps them (Go's rule,
//!    with the port counted). `Host` is removed, so that the next hop sets it from its URL.
//! 4. **Limit.** A response that would be redirect number `limit + 1` ends the chain with an
//!    [`ClientErrorKind::TooManyRedirects`](crate::ClientErrorKind::TooManyRedirects) error naming the limit and the last URLs: a loop sends
//!    `limit + 1` requests, then stops.
//! 5. **Connections.** The body of a response that is followed is read and thrown away when it
//!    is short (at most 2 KiB, `DRAIN_LIMIT`; most redirects have a few bytes or none), so
//!    that its HTTP/1.1 connection goes back to the pool for the next hop; a longer one is
//!    dropped, which closes its connection (module `body`). Neither is ever left open.
//! 6. **Time.** The request timeout ([`ClientBuilder::request_timeout`]) covers the whole
//!    chain, every hop and the reading of the bodies thrown away, up to the head of the
//!    final response: `Client::send` times the first exchange and then the boxed `chain`.
//! 7. **The final URL.** A response reached through at least one redirect carries its URL as
//!    the extension [`ResponseUrl`]; one without it came from the URL requested. (Always
//!    adding it would cost every request an allocation or two for a fact the caller has.)
//!
//! What this costs a request that is not redirected: a copy of its URI, header map,
//! extensions (the last two only when not empty) and in-memory body (a reference count),
//! kept to make the next hop (`Kept`, which the exchange's retries borrow instead of
//! copying the request again); the chain's own state is boxed, made only for a redirect.
//! The figures are in `docs/perf/http.md` ("Client"). [`Policy::none`] keeps nothing.
//!
//! [`Body::wrap`]: crate::Body::wrap
//! [`ClientBuilder::request_timeout`]: crate::ClientBuilder::request_timeout

use std::fmt;

use hyper::Uri;

/// Which redirects a [`Client`](crate::Client) follows: set with
/// [`ClientBuilder::redirect`](crate::ClientBuilder::redirect). The default is
/// [`Policy::limited(10)`](Policy::limited), as Go's and reqwest's clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `None`: redirects are not followed.
    pub(super) limit: Option<usize>,
}

impl Policy {
    /// Follow at most `max` redirects a request: a response that would be redirect number
    /// `max + 1` is an [`ClientErrorKind::TooManyRedirects`](crate::ClientErrorKind::TooManyRedirects) error (so `limited(0)` makes every
    /// redirect an error, where [`Policy::none`] returns it).
    pub fn limited(max: usize) -> Policy {
        Policy { limit: Some(max) }
    }

    /// Follow no redirect: a 3xx response is returned as it is.
    pub fn none() -> Policy {
        Policy { limit: None }
    }
}

impl Default for Policy {
    /// [`Policy::limited(10)`](Policy::limited).
    fn default() -> Policy {
        Policy::limited(10)
    }
}

/// The URL a response came from, in its extensions when the client followed at least one
/// redirect to get it (`res.extensions().get::<ResponseUrl>()`); a response without it came
/// from the URL requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseUrl(pub Uri);

impl ResponseUrl {
    /// The URL.
    pub fn uri(&self) -> &Uri {
        &self.0
    }
}

impl fmt::Display for ResponseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
