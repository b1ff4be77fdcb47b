//! [`Key`]: where a pooled connection goes (scheme, host and port), the pool's key and the
//! name of a connection in the client's errors.

use std::fmt;

use hyper::Uri;

use crate::client::error::{ClientError, ClientErrorKind};

/// Where a pooled connection goes: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) https: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port) // an IPv6 address
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

impl Key {
    pub(crate) fn from_uri(uri: &Uri) -> Result<Key, ClientError> {
        let bad = |why: &str| ClientError::new(ClientErrorKind::InvalidUrl, format!("{uri}: {why}"));
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => return Err(bad(&format!("unsupported scheme {other:?}"))),
            None => return Err(bad("an absolute URL (http:// or https://) is needed")),
        };
        let host = uri.host().ok_or_else(|| bad("no host"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Key { https, host, port })
    }
}
