//! Following redirects: the rules of the public module [`redirect`](crate::redirect), applied
//! to a response and the ones after it, each hop an exchange of its own (module `exchange`).

use std::sync::Arc;

use http_body::Body as _;
use http_body_util::BodyExt;
use hyper::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST, LOCATION, PROXY_AUTHORIZATION,
    TRANSFER_ENCODING, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode, Uri};

use crate::client::body::PooledBody;
use crate::client::error::{ClientError, ClientErrorKind};
use crate::client::exchange::{exchange, Inner};
use crate::client::key::Key;
use crate::client::redirect::ResponseUrl;
use crate::client::retry::Kept;
use crate::transport::body::Body;

/// The most of a redirect's body that is read (and thrown away) to keep its connection.
const DRAIN_LIMIT: u64 = 2 * 1024;

/// Headers that only the origin they were meant for may see.
const SENSITIVE: [hyper::header::HeaderName; 4] =
    [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION, WWW_AUTHENTICATE];

/// Whether `res` is a redirect to follow (if the policy follows any): `Client::send` then
/// hands it to [`chain`].
pub(crate) fn is_redirect(res: &Response<PooledBody>) -> bool {
    is_followed(res.status()) && res.headers().contains_key(LOCATION)
}

/// Follows the redirect `res` (the answer to `sent`) and the ones after it, up to `limit`.
pub(crate) async fn chain(
    inner: &Arc<Inner>,
    limit: usize,
    mut sent: Kept,
    mut res: Response<PooledBody>,
) -> Result<Response<PooledBody>, ClientError> {
    let mut followed = 0;
    loop {
        let status = res.status();
        let location = match res.headers().get(LOCATION) {
            Some(location) if is_followed(status) => location,
            _ => return Ok(arrived(res, sent.uri, followed)),
        };
        let target = resolve(&sent.uri, location)?;
        let from = sent.uri.clone();
        let Some(next) = next_hop(sent, status, target) else {
            // A streamed body cannot go again: the 3xx is the answer (rule 2).
            return Ok(arrived(res, from, followed));
        };
        if followed == limit {
            let message = format!(
                "more than {limit} redirects (the limit): the last, {status} from {from}, to {}",
                next.uri()
            );
            return Err(ClientError::new(ClientErrorKind::TooManyRedirects, message));
        }
        log::debug!("{status} from {from}: following to {}", next.uri());
        drain(res.into_body()).await;
        followed += 1;
        sent = Kept::of(&next);
        res = exchange(inner, next, Some(&sent)).await?;
    }
}

fn is_followed(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// The final response, with its URL when it was reached through a redirect (rule 7).
fn arrived(mut res: Response<PooledBody>, uri: Uri, followed: usize) -> Response<PooledBody> {
    if followed > 0 {
        res.extensions_mut().insert(ResponseUrl(uri));
    }
    res
}

/// Reads a redirect's body to its end if it is short, so that its connection goes back to
/// the pool (`PooledBody` gives it back at the end); drops it otherwise, which closes it.
async fn drain(mut body: PooledBody) {
    if body.size_hint().lower() > DRAIN_LIMIT {
        return;
    }
    let mut read = 0;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return };
        read += frame.data_ref().map_or(0, |data| data.len() as u64);
        if read > DRAIN_LIMIT {
            return;
        }
    }
}

/// `location` resolved against `base`, if it is an `http` or `https` URL (rule 1).
fn resolve(base: &Uri, location: &hyper::header::HeaderValue) -> Result<Uri, ClientError> {
    let bad = |why: &str| {
        ClientError::new(ClientErrorKind::InvalidUrl, format!("redirect from {base} to {location:?}: {why}"))
    };
    // Servers do send raw UTF-8 (not ASCII) in `Location`; `url` percent-encodes it.
    let text = std::str::from_utf8(location.as_bytes()).map_err(|_| bad("Location is not UTF-8"))?;
    let base_url = url::Url::parse(&base.to_string()).map_err(|e| bad(&format!("the base URL: {e}")))?;
    let mut target = base_url.join(text.trim()).map_err(|e| bad(&e.to_string()))?;
    if !matches!(target.scheme(), "http" | "https") {
        return Err(bad(&format!("unsupported scheme {:?} (http or https only)", target.scheme())));
    }
    target.set_fragment(None);
    target.as_str().parse().map_err(|e| bad(&format!("{e}")))
}

/// The request that follows a `status` redirect of `sent` to `target` (rules 2 and 3); `None`
/// when it would need the body again and that was a stream.
fn next_hop(sent: Kept, status: StatusCode, target: Uri) -> Option<Request<Body>> {
    let to_get = match status.as_u16() {
        301 | 302 => sent.method == Method::POST,
        303 => sent.method != Method::GET && sent.method != Method::HEAD,
        _ => false,
    };
    let mut headers = sent.headers.map(|h| *h).unwrap_or_default();
    let (method, body) = if to_get {
        for name in [CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING] {
            headers.remove(name);
        }
        (Method::GET, Body::empty())
    } else {
        (sent.method, sent.body?.body())
    };
    headers.remove(HOST);
    if !same_origin_for_credentials(&sent.uri, &target) {
        for name in SENSITIVE {
            headers.remove(name);
        }
    }
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = target;
    *req.headers_mut() = headers;
    if let Some(extensions) = sent.extensions {
        *req.extensions_mut() = *extensions;
    }
    Some(req)
}

/// Whether credentials may follow a redirect from `from` to `to`: the same host and port, and
/// not from `https` down to `http` (rule 3).
fn same_origin_for_credentials(from: &Uri, to: &Uri) -> bool {
    match (Key::from_uri(from), Key::from_uri(to)) {
        (Ok(from), Ok(to)) => {
            from.host.eq_ignore_ascii_case(&to.host) && from.port == to.port && (to.https || !from.https)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(base: &str, location: &str) -> Result<String, ClientErrorKind> {
        let location = hyper::header::HeaderValue::from_str(location).unwrap();
        resolve(&base.parse().unwrap(), &location).map(|uri| uri.to_string()).map_err(|e| e.kind())
    }

    #[test]
    fn locations_resolve_per_rfc_3986() {
        let base = "http://a.test:8080/b/c/d?q=1";
        assert_eq!(resolved(base, "https://x.test/y").unwrap(), "https://x.test/y");
        assert_eq!(resolved(base, "//x.test/y").unwrap(), "http://x.test/y");
        assert_eq!(resolved(base, "/y?z").unwrap(), "http://a.test:8080/y?z");
        assert_eq!(resolved(base, "y").unwrap(), "http://a.test:8080/b/c/y");
        assert_eq!(resolved(base, "../y").unwrap(), "http://a.test:8080/b/y");
        assert_eq!(resolved(base, "?r=2").unwrap(), "http://a.test:8080/b/c/d?r=2");
        assert_eq!(resolved(base, "/y#frag").unwrap(), "http://a.test:8080/y");
        assert_eq!(resolved(base, "ftp://x.test/y"), Err(ClientErrorKind::InvalidUrl));
        assert_eq!(resolved(base, "mailto:someone@x.test"), Err(ClientErrorKind::InvalidUrl));
        assert_eq!(resolved(base, "http://"), Err(ClientErrorKind::InvalidUrl));
    }

    #[test]
    fn credentials_follow_only_the_same_host_and_port_and_never_down_to_http() {
        let same =
            |from: &str, to: &str| same_origin_for_credentials(&from.parse().unwrap(), &to.parse().unwrap());
        assert!(same("http://a.test/x", "http://a.test:80/y"));
        assert!(same("http://A.test/x", "http://a.test/y"));
        assert!(same("https://a.test/x", "https://a.test:443/y"));
        assert!(!same("http://a.test/x", "http://b.test/y"));
        assert!(!same("http://a.test/x", "http://a.test:8080/y"));
        assert!(!same("https://a.test:8443/x", "http://a.test:8443/y"));
    }

    #[test]
    fn methods_and_bodies_per_status() {
        let next = |status: u16, method: Method, body: Body| {
            let req = Request::builder()
                .method(method)
                .uri("http://a.test/x")
                .header(CONTENT_TYPE, "text/plain")
                .header(HOST, "a.test")
                .body(body)
                .unwrap();
            let target = "http://a.test/y".parse().unwrap();
            next_hop(Kept::of(&req), StatusCode::from_u16(status).unwrap(), target)
        };
        let get = next(302, Method::POST, Body::from("x")).unwrap();
        assert_eq!(*get.method(), Method::GET);
        assert!(get.headers().get(CONTENT_TYPE).is_none() && get.headers().get(HOST).is_none());
        assert_eq!(*next(301, Method::PUT, Body::from("x")).unwrap().method(), Method::PUT);
        assert_eq!(*next(303, Method::DELETE, Body::empty()).unwrap().method(), Method::GET);
        assert_eq!(*next(303, Method::HEAD, Body::empty()).unwrap().method(), Method::HEAD);
        let kept = next(308, Method::POST, Body::from("x")).unwrap();
        assert_eq!(
            (kept.method(), kept.headers()[CONTENT_TYPE].as_bytes()),
            (&Method::POST, &b"text/plain"[..])
        );
        let stream = || Body::wrap(http_body_util::Empty::<bytes::Bytes>::new());
        assert!(next(307, Method::POST, stream()).is_none());
        assert!(next(303, Method::POST, stream()).is_some());
    }
}
