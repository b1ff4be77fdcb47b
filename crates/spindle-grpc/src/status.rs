//! The statuses the crate decides itself for a handler (its deadline passed, it panicked),
//! and a status as the trailers frame that ends a response body. A leaf shared by the
//! in-process channel, its pump, the typed path and the network client.

use bytes::Bytes;
use http_body::Frame;
use tonic::Status;

/// A handler's deadline passed (the channel's `grpc-timeout` enforcement).
pub(crate) fn deadline_exceeded() -> Status {
    Status::deadline_exceeded("deadline exceeded (enforced by spindle-grpc)")
}

/// A handler panicked with `payload` (caught: the call ends, the channel serves on).
pub(crate) fn panicked(payload: &(dyn std::any::Any + Send)) -> Status {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic");
    log::error!("spindle-grpc: a handler panicked: {what}");
    Status::internal(format!("the handler panicked: {what}"))
}

/// A status code's name as gRPC spells it (`UNAVAILABLE`): service configs' retryable codes,
/// the `grpc_code` label of the call figures.
pub(crate) fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// A trailers frame carrying `status`.
pub(crate) fn status_trailers(status: &Status) -> Frame<Bytes> {
    let mut trailers = http::HeaderMap::with_capacity(2);
    // add_header fails only on a message that cannot be percent-encoded into a header value.
    if status.add_header(&mut trailers).is_err() {
        trailers.insert(Status::GRPC_STATUS, (status.code() as i32).into());
    }
    Frame::trailers(trailers)
}
