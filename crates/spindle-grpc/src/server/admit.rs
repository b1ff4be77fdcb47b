//! What the network server refuses before a call starts: requests that are not gRPC, as
//! grpc-go's server transport refuses them, each with the HTTP status that tells any HTTP
//! client what went wrong and a gRPC status in trailers-only form (one HEADERS frame with
//! END_STREAM: `:status`, `content-type: application/grpc`, `grpc-status`, `grpc-message`).
//!
//! | request | HTTP status | gRPC status |
//! |---|---|---|
//! | `content-type` missing, or not `application/grpc`, `application/grpc+…`, `application/grpc;…` | 415 | `INVALID_ARGUMENT` |
//! | `grpc-timeout` not 1 to 8 ASCII digits and one unit of `H M S m u n` | 400 | `INTERNAL` |
//! | a method other than `POST` | 405 | `INTERNAL` |
//!
//! # Invariants
//!
//! - **Refused before the channel.** The checks run on the request's headers in the order
//!   above (grpc-go's), before the channel sees the request: a refused request runs no
//!   handler, is no call (not in [`crate::ServerStats`]), and its body is dropped unread (h2
//!   then resets the stream with `NO_ERROR` if the client is still sending, as grpc-go does).
//! - **Only on the network.** The in-process [`crate::Channel`] gets its requests from tonic's
//!   clients, which always send them well formed: it checks none of this.

use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, StatusCode};
use tonic::Status;

use crate::channel::{ResponseBody, ResponseFuture};
use crate::timeout::{parse_timeout, GRPC_TIMEOUT};

/// `application/grpc`, the content type of every gRPC request and response.
const GRPC: &[u8] = b"application/grpc";

/// The answer refusing `request` (module docs), ready, or `None` if it may start a call.
pub(crate) fn check<B>(request: &http::Request<B>) -> Option<ResponseFuture> {
    Some(ResponseFuture::ready(refusal(request)?.map(|()| ResponseBody::default())))
}

/// The response refusing `request` (module docs), or `None` if it may start a call.
pub(crate) fn refusal<B>(request: &http::Request<B>) -> Option<http::Response<()>> {
    let headers = request.headers();
    let content_type = headers.get(CONTENT_TYPE);
    if !content_type.is_some_and(is_grpc) {
        let shown =
            content_type.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).unwrap_or_default();
        let status = Status::invalid_argument(format!("invalid gRPC request content-type {shown:?}"));
        return Some(refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, &status));
    }
    if let Some(timeout) = headers.get(&GRPC_TIMEOUT) {
        if parse_timeout(timeout).is_none() {
            let shown = String::from_utf8_lossy(timeout.as_bytes());
            let status = Status::internal(format!("malformed grpc-timeout: {shown:?}"));
            return Some(refuse(StatusCode::BAD_REQUEST, &status));
        }
    }
    if request.method() != Method::POST {
        let status = Status::internal(format!("the method is {}: gRPC requests are POST", request.method()));
        return Some(refuse(StatusCode::METHOD_NOT_ALLOWED, &status));
    }
    None
}

/// Whether a `content-type` is gRPC's: `application/grpc`, or it followed by `+` (a codec's
/// subtype) or `;` (parameters), compared as grpc-go compares it.
fn is_grpc(value: &HeaderValue) -> bool {
    match value.as_bytes().strip_prefix(GRPC) {
        Some(rest) => matches!(rest.first(), None | Some(b'+' | b';')),
        None => false,
    }
}

/// A trailers-only response: HTTP `code`, gRPC's content type, and `status`.
fn refuse(code: StatusCode, status: &Status) -> http::Response<()> {
    let mut response = http::Response::new(());
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    // add_header fails only on a message that cannot be percent-encoded into a header value.
    if status.add_header(headers).is_err() {
        headers.insert(Status::GRPC_STATUS, (status.code() as i32).into());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, headers: &[(&'static str, &'static [u8])]) -> http::Request<()> {
        let mut request = http::Request::new(());
        *request.method_mut() = method;
        for (name, value) in headers {
            request.headers_mut().append(*name, HeaderValue::from_bytes(value).unwrap());
        }
        request
    }

    fn refused(method: Method, headers: &[(&'static str, &'static [u8])]) -> Option<(u16, Status)> {
        let response = refusal(&request(method, headers))?;
        assert_eq!(response.headers()[CONTENT_TYPE], "application/grpc");
        Some((
            response.status().as_u16(),
            Status::from_header_map(response.headers()).expect("a grpc-status"),
        ))
    }

    #[test]
    fn grpc_content_types_pass_others_are_415() {
        for ok in [
            &b"application/grpc"[..],
            b"application/grpc+proto",
            b"application/grpc;charset=utf-8",
            b"application/grpc+",
        ] {
            assert!(is_grpc(&HeaderValue::from_bytes(ok).unwrap()), "{ok:?}");
        }
        for bad in [
            &b"application/json"[..],
            b"application/grpcx",
            b"application/grpc-web",
            b"text/plain",
            b"",
            b"APPLICATION/GRPC",
        ] {
            let (code, status) = refused(Method::POST, &[("content-type", bad)]).expect("refused");
            assert_eq!((code, status.code()), (415, tonic::Code::InvalidArgument), "{bad:?}");
        }
        let (code, _) = refused(Method::POST, &[]).expect("no content-type refused");
        assert_eq!(code, 415);
    }

    #[test]
    fn malformed_timeouts_are_400() {
        for ok in [&b"1n"[..], b"99999999H", b"0S", b"00000001m", b"5u", b"3M"] {
            assert!(
                refused(Method::POST, &[("content-type", GRPC), ("grpc-timeout", ok)]).is_none(),
                "{ok:?}"
            );
        }
        for bad in [
            &b"1"[..],
            b"S",
            b"",
            b"123456789S",
            b"+5S",
            b"-5S",
            b" 5S",
            b"5 S",
            b"5s",
            b"5x",
            b"1.5S",
            b"\xff5S",
        ] {
            let (code, status) =
                refused(Method::POST, &[("content-type", GRPC), ("grpc-timeout", bad)]).expect("refused");
            assert_eq!((code, status.code()), (400, tonic::Code::Internal), "{bad:?}");
            assert!(status.message().starts_with("malformed grpc-timeout"), "{status:?}");
        }
    }

    #[test]
    fn methods_other_than_post_are_405_after_the_other_checks() {
        for method in [Method::GET, Method::PUT, Method::HEAD, Method::OPTIONS, Method::DELETE] {
            let (code, status) = refused(method.clone(), &[("content-type", GRPC)]).expect("refused");
            assert_eq!((code, status.code()), (405, tonic::Code::Internal), "{method}");
        }
        // grpc-go's order: the content type first, then the timeout, then the method.
        assert_eq!(refused(Method::GET, &[("content-type", b"text/html")]).unwrap().0, 415);
        assert_eq!(refused(Method::GET, &[("content-type", GRPC), ("grpc-timeout", b"x")]).unwrap().0, 400);
        assert!(refused(Method::POST, &[("content-type", GRPC)]).is_none());
    }
}
