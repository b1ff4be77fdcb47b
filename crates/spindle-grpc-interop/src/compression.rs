//! The compressed-message flags of the interop suite's compression cases, read off the wire.
//!
//! Whether a message was compressed is the first byte of its gRPC frame prefix (one byte of
//! flag, four bytes of big-endian length), which tonic decodes and does not show: the
//! `grpc-encoding` header only names the encoding a message *may* use. So both ends read the
//! prefixes themselves, below tonic:
//!
//! - the interop server wraps its service in [`RecordRequestFlags`], which puts the
//!   [`MessageFlags`] of each request's messages in the request's extensions, where the
//!   handlers check `expect_compressed` against them (the spec's CompressedRequest: a mismatch
//!   fails the call with `INVALID_ARGUMENT`);
//! - the interop client's `server_compressed_unary` wraps its transport in
//!   [`RecordResponseFlags`], which puts the [`MessageFlags`] of each response's messages in
//!   the response's extensions.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf as _, Bytes};
use futures_util::TryFutureExt as _;
use http_body::{Body, Frame};
use tonic::client::GrpcService;
use tonic::server::NamedService;

/// The compressed flags of one body's messages, in order, as far as the body has been read
/// (a message's flag is known once its prefix has arrived, before tonic decodes it).
#[derive(Debug, Clone, Default)]
pub struct MessageFlags(Arc<Mutex<Vec<bool>>>);

impl MessageFlags {
    /// Whether message `index` (from 0) was compressed; `None` if its prefix has not been read.
    pub fn get(&self, index: usize) -> Option<bool> {
        self.0.lock().unwrap().get(index).copied()
    }

    /// The flags read so far.
    pub fn to_vec(&self) -> Vec<bool> {
        self.0.lock().unwrap().clone()
    }
}

/// Follows gRPC frame prefixes through a body's data chunks, wherever the chunks split them.
#[derive(Debug, Default)]
struct PrefixReader {
    prefix: [u8; 5],
    have: usize,
    /// Bytes of the current message still to skip.
    skip: u64,
}

impl PrefixReader {
    fn feed(&mut self, mut data: &[u8], flags: &MessageFlags) {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len() as u64) as usize;
                self.skip -= n as u64;
                data.advance(n);
                continue;
            }
            let n = (5 - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data.advance(n);
            if self.have == 5 {
                flags.0.lock().unwrap().push(self.prefix[0] & 1 == 1);
                self.skip =
                    u32::from_be_bytes([self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]])
                        .into();
                self.have = 0;
            }
        }
    }
}

/// A body passed through unchanged, its messages' flags recorded in a [`MessageFlags`].
pub struct FlaggedBody<B> {
    inner: Pin<Box<B>>,
    reader: PrefixReader,
    flags: MessageFlags,
}

impl<B> FlaggedBody<B> {
    fn new(inner: B, flags: MessageFlags) -> FlaggedBody<B> {
        FlaggedBody { inner: Box::pin(inner), reader: PrefixReader::default(), flags }
    }
}

impl<B: Body<Data = Bytes>> Body for FlaggedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let polled = this.inner.as_mut().poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                this.reader.feed(data, &this.flags);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A server middleware: each request's [`MessageFlags`] in its extensions (see the module doc).
#[derive(Debug, Clone)]
pub struct RecordRequestFlags<S>(pub S);

impl<S: NamedService> NamedService for RecordRequestFlags<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> tower_service::Service<http::Request<tonic::body::Body>> for RecordRequestFlags<S>
where
    S: tower_service::Service<http::Request<tonic::body::Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> S::Future {
        let flags = MessageFlags::default();
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(flags.clone());
        let body = tonic::body::Body::new(FlaggedBody::new(body, flags));
        self.0.call(http::Request::from_parts(parts, body))
    }
}

/// A client transport: each response's [`MessageFlags`] in its extensions (see the module
/// doc), which tonic hands on in the `tonic::Response`.
#[derive(Debug, Clone)]
pub struct RecordResponseFlags<T>(pub T);

type Flag<B> = fn(http::Response<B>) -> http::Response<FlaggedBody<B>>;

fn flag<B>(response: http::Response<B>) -> http::Response<FlaggedBody<B>> {
    let flags = MessageFlags::default();
    let (mut parts, body) = response.into_parts();
    parts.extensions.insert(flags.clone());
    http::Response::from_parts(parts, FlaggedBody::new(body, flags))
}

impl<T: GrpcService<R>, R> tower_service::Service<http::Request<R>> for RecordResponseFlags<T> {
    type Response = http::Response<FlaggedBody<T::ResponseBody>>;
    type Error = T::Error;
    type Future = futures_util::future::MapOk<T::Future, Flag<T::ResponseBody>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<R>) -> Self::Future {
        self.0.call(request).map_ok(flag as Flag<T::ResponseBody>)
    }
}

#[cfg(test)]
mod tests {
    use super::{MessageFlags, PrefixReader};

    #[test]
    fn prefixes_split_anywhere() {
        // Three messages: compressed of 3 bytes, plain of 0 bytes, compressed of 2 bytes.
        let wire: Vec<u8> =
            [&[1, 0, 0, 0, 3, 7, 7, 7][..], &[0, 0, 0, 0, 0], &[1, 0, 0, 0, 2, 9, 9]].concat();
        for chunk in 1..=wire.len() {
            let flags = MessageFlags::default();
            let mut reader = PrefixReader::default();
            for piece in wire.chunks(chunk) {
                reader.feed(piece, &flags);
            }
            assert_eq!(flags.to_vec(), [true, false, true], "chunks of {chunk}");
        }
    }
}
