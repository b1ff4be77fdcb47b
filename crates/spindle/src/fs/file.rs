//! [`File`] and [`OpenOptions`]: an open file whose every operation runs on the file pool,
//! in order, through the file's operation queue (module `queue`).
//!
//! # Invariants
//!
//! - Each blocking-style call (`Read`, `Write`, `Seek`, `sync_all`, …) queues one operation and
//!   waits for its result: the fiber parks, a plain thread blocks (and drains the queue itself
//!   when it finds it idle).
//! - Each poll-side call (`AsyncRead`, `AsyncWrite`, `AsyncSeek`) queues its operation at its
//!   first poll and keeps the receiver in `File::pending` until a poll of the same kind takes
//!   the result. A poll of another kind leaves that operation to run and starts its own behind
//!   it (module `queue`, "eager submission").
//! - A read or write moves at most [`MAX_IO_BYTES`] per call, through a buffer owned by the job
//!   (the caller's buffer cannot be lent to another thread: a cancelled fiber or a dropped
//!   future would leave the job writing into freed memory). A read that returned more bytes
//!   than a later poll's (smaller) buffer holds hands the rest back with a seek queued at once,
//!   so the file's position always matches the bytes delivered.

use std::fmt;
use std::fs::{Metadata, Permissions};
use std::future::Future;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::pool::{offload, offload_async, shut_down};
use super::queue::Shared;
use crate::sched::caller::blocking_caller;
use crate::sync::oneshot::Receiver;

/// The most bytes one read or write of a [`File`] moves (a longer buffer gets a short count,
/// which `read_exact` and `write_all` continue).
pub const MAX_IO_BYTES: usize = 2 * 1024 * 1024;

/// An open file. In a fiber, `Read`, `Write` and `Seek` (on `File` and on `&File`) park the
/// fiber while the call runs on the file pool; in a task, use `futures-io`'s
/// `AsyncRead`, `AsyncWrite` and `AsyncSeek` and the `*_async` methods.
///
/// Operations run one at a time in the order they were started, whoever started them: a
/// `File` shared by fibers (`&File`, `Arc<File>`) never reorders or interleaves a read, a
/// write or a seek, and an async operation abandoned half-way still runs in its place.
/// Dropping a `File` lets its queued operations finish; the
/// descriptor closes after the last.
///
/// ```
/// use std::io::{Read, Seek, SeekFrom, Write};
///
/// let path = std::env::temp_dir().join(format!("spindle-file-doc-{}", std::process::id()));
/// let rt = spindle::Runtime::new().unwrap();
/// let back = rt.block_on(move || {
///     let mut file = spindle::fs::File::options().read(true).write(true).create(true).open(&path)?;
///     file.write_all(b"hello, file")?;
///     file.seek(SeekFrom::Start(7))?;
///     let mut back = String::new();
///     file.read_to_string(&mut back)?;
///     spindle::fs::remove_file(&path)?;
///     std::io::Result::Ok(back)
/// });
/// assert_eq!(back.unwrap(), "file");
/// ```
pub struct File {
    shared: Arc<Shared>,
    /// The operation a poll-side call started and has not taken the result of.
    pending: Option<Pending>,
}

/// The receiver of a poll-side operation's result, by kind.
enum Pending {
    Read(Receiver<io::Result<Vec<u8>>>),
    Write(Receiver<io::Result<usize>>),
    Seek(Receiver<io::Result<u64>>),
    /// A no-op queued behind the others: flushing waits for it.
    Flush(Receiver<()>),
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File").field("fd", &self.shared.std.as_raw_fd()).finish_non_exhaustive()
    }
}

/// The operation of a read of up to `len` bytes.
fn read_op(len: usize) -> impl FnOnce(&std::fs::File) -> io::Result<Vec<u8>> + Send + 'static {
    move |mut file| {
        let mut buf = vec![0; len.min(MAX_IO_BYTES)];
        let n = file.read(&mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }
}

/// The operation of a write of (the first [`MAX_IO_BYTES`] of) `buf`.
fn write_op(buf: &[u8]) -> impl FnOnce(&std::fs::File) -> io::Result<usize> + Send + 'static {
    let data = buf[..buf.len().min(MAX_IO_BYTES)].to_vec();
    move |mut file| file.write(&data)
}

/// An operation's result; the sender dropped unrun means its runtime shut down.
fn received<T>(result: Result<io::Result<T>, crate::sync::RecvError>) -> io::Result<T> {
    result.unwrap_or_else(|_| Err(shut_down()))
}

impl File {
    /// Opens `path` read-only ([`std::fs::File::open`]).
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`open_async`](Self::open_async).
    #[track_caller]
    pub fn open(path: impl AsRef<Path>) -> io::Result<File> {
        let path = path.as_ref().to_owned();
        offload("fs::File::open", move || std::fs::File::open(path)).map(File::from_std)
    }

    /// The future-side [`open`](Self::open).
    pub fn open_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<File>> + Send + 'static {
        let path = path.as_ref().to_owned();
        let open = offload_async(move || std::fs::File::open(path));
        async move { open.await.map(File::from_std) }
    }

    /// Opens `path` write-only, creating it or truncating it ([`std::fs::File::create`]).
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`create_async`](Self::create_async).
    #[track_caller]
    pub fn create(path: impl AsRef<Path>) -> io::Result<File> {
        let path = path.as_ref().to_owned();
        offload("fs::File::create", move || std::fs::File::create(path)).map(File::from_std)
    }

    /// The future-side [`create`](Self::create).
    pub fn create_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<File>> + Send + 'static {
        let path = path.as_ref().to_owned();
        let open = offload_async(move || std::fs::File::create(path));
        async move { open.await.map(File::from_std) }
    }

    /// Options to open a file with (read, write, append, create, …): [`OpenOptions`].
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// Takes over an open std file.
    pub fn from_std(file: std::fs::File) -> File {
        File { shared: Shared::new(file), pending: None }
    }

    /// Runs `op` as this file's next operation and waits for it (blocking-style).
    #[track_caller]
    fn run<T, F>(&self, call: &'static str, op: F) -> io::Result<T>
    where
        F: FnOnce(&std::fs::File) -> io::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        blocking_caller(call);
        received(self.shared.submit(op).recv())
    }

    /// Queues `op` as this file's next operation; the future waits for its result.
    fn run_async<T, F>(&self, op: F) -> impl Future<Output = io::Result<T>> + Send + 'static
    where
        F: FnOnce(&std::fs::File) -> io::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let shared = self.shared.clone();
        async move { received(shared.submit(op).await) }
    }

    /// Flushes the file's data and metadata to the device ([`std::fs::File::sync_all`]), after
    /// every operation started before.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`sync_all_async`](Self::sync_all_async).
    #[track_caller]
    pub fn sync_all(&self) -> io::Result<()> {
        self.run("fs::File::sync_all", |f| f.sync_all())
    }

    /// The future-side [`sync_all`](Self::sync_all).
    pub fn sync_all_async(&self) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.run_async(|f| f.sync_all())
    }

    /// Flushes the file's data (and the metadata needed to read it back) to the device
    /// ([`std::fs::File::sync_data`]).
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`sync_data_async`](Self::sync_data_async).
    #[track_caller]
    pub fn sync_data(&self) -> io::Result<()> {
        self.run("fs::File::sync_data", |f| f.sync_data())
    }

    /// The future-side [`sync_data`](Self::sync_data).
    pub fn sync_data_async(&self) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.run_async(|f| f.sync_data())
    }

    /// Truncates or extends the file to `size` bytes ([`std::fs::File::set_len`]); the
    /// position does not move.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`set_len_async`](Self::set_len_async).
    #[track_caller]
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        self.run("fs::File::set_len", move |f| f.set_len(size))
    }

    /// The future-side [`set_len`](Self::set_len).
    pub fn set_len_async(&self, size: u64) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.run_async(move |f| f.set_len(size))
    }

    /// The file's metadata ([`std::fs::File::metadata`]).
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`metadata_async`](Self::metadata_async).
    #[track_caller]
    pub fn metadata(&self) -> io::Result<Metadata> {
        self.run("fs::File::metadata", |f| f.metadata())
    }

    /// The future-side [`metadata`](Self::metadata).
    pub fn metadata_async(&self) -> impl Future<Output = io::Result<Metadata>> + Send + 'static {
        self.run_async(|f| f.metadata())
    }

    /// Sets the file's permissions ([`std::fs::File::set_permissions`]).
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use
    /// [`set_permissions_async`](Self::set_permissions_async).
    #[track_caller]
    pub fn set_permissions(&self, perm: Permissions) -> io::Result<()> {
        self.run("fs::File::set_permissions", move |f| f.set_permissions(perm))
    }

    /// The future-side [`set_permissions`](Self::set_permissions).
    pub fn set_permissions_async(
        &self,
        perm: Permissions,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.run_async(move |f| f.set_permissions(perm))
    }

    /// A second `File` for the same open file (a duplicated descriptor, `dup(2)`: no disk
    /// access, so it runs on the caller). The two share the position, as std's clones do, but
    /// not the queue: operations on the clone are ordered among themselves only.
    pub fn try_clone(&self) -> io::Result<File> {
        Ok(File::from_std(self.shared.std.try_clone()?))
    }

    /// Reads to the end of the file in one job (not one per buffer's worth): the blocking
    /// `read_to_end`, shared by `File` and `&File`.
    #[track_caller]
    fn read_to_end_in_one(&self, out: &mut Vec<u8>) -> io::Result<usize> {
        let data = self.run("fs::File read", |mut f| {
            let mut data = Vec::new();
            f.read_to_end(&mut data)?;
            Ok(data)
        })?;
        out.extend_from_slice(&data);
        Ok(data.len())
    }

    /// Waits for every operation started before (the blocking `flush`). Writes go straight to
    /// the file, so a flush has nothing of its own to do.
    #[track_caller]
    fn wait_idle(&self) -> io::Result<()> {
        if !self.shared.busy() {
            return Ok(());
        }
        self.run("fs::File flush", |_| Ok(()))
    }

    /// The poll side of every async operation: takes the result of `pending` if it is of the
    /// kind `take` accepts, or starts the operation `start` gives.
    fn poll_op<T>(
        &mut self,
        cx: &mut Context<'_>,
        take: impl Fn(&mut Pending, &mut Context<'_>) -> Option<Poll<io::Result<T>>>,
        start: impl FnOnce(&Arc<Shared>) -> Pending,
    ) -> Poll<io::Result<T>> {
        if let Some(polled) = self.pending.as_mut().and_then(|p| take(p, cx)) {
            if polled.is_ready() {
                self.pending = None;
            }
            return polled;
        }
        // None, or another kind: that one runs first (its result is dropped), this one after.
        let mut pending = start(&self.shared);
        let polled = take(&mut pending, cx).expect("a started operation is of its own kind");
        if polled.is_pending() {
            self.pending = Some(pending);
        }
        polled
    }
}

/// Polls a receiver for a poll-side operation.
fn poll_rx<T>(rx: &mut Receiver<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
    Pin::new(rx).poll(cx).map(received)
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.std.as_fd()
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.shared.std.as_raw_fd()
    }
}

// Blocking-style I/O traits, for fibers and plain threads. Each panics in an async task on a
// spindle worker (module `sched::caller`), naming the futures-io traits.

impl Read for &File {
    #[track_caller]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let data = self.run("fs::File read", read_op(buf.len()))?;
        buf[..data.len()].copy_from_slice(&data);
        Ok(data.len())
    }

    #[track_caller]
    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.read_to_end_in_one(buf)
    }
}

impl Read for File {
    #[track_caller]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }

    #[track_caller]
    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        self.read_to_end_in_one(buf)
    }
}

impl Write for &File {
    #[track_caller]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.run("fs::File write", write_op(buf))
    }

    #[track_caller]
    fn flush(&mut self) -> io::Result<()> {
        self.wait_idle()
    }
}

impl Write for File {
    #[track_caller]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    #[track_caller]
    fn flush(&mut self) -> io::Result<()> {
        self.wait_idle()
    }
}

impl Seek for &File {
    #[track_caller]
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.run("fs::File seek", move |mut f| f.seek(pos))
    }
}

impl Seek for File {
    #[track_caller]
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        (&*self).seek(pos)
    }
}

// The futures-io traits, for async tasks (module doc: one pending operation, eager queueing).

impl futures_io::AsyncRead for File {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let this = self.get_mut();
        let len = buf.len();
        let data = match this.poll_op(
            cx,
            |p, cx| match p {
                Pending::Read(rx) => Some(poll_rx(rx, cx)),
                _ => None,
            },
            |shared| Pending::Read(shared.submit(read_op(len))),
        ) {
            Poll::Ready(Ok(data)) => data,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        let n = data.len().min(buf.len());
        buf[..n].copy_from_slice(&data[..n]);
        if n < data.len() {
            // Polled again with a smaller buffer: give the rest back, ahead of anything else.
            let back = (data.len() - n) as i64;
            drop(this.shared.submit(move |mut f| f.seek(SeekFrom::Current(-back))));
        }
        Poll::Ready(Ok(n))
    }
}

impl futures_io::AsyncWrite for File {
    /// Writes (the first [`MAX_IO_BYTES`] of) `buf`. The bytes are taken at the first poll: a
    /// poll that finds the write done reports its count, whatever buffer it passes.
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.get_mut().poll_op(
            cx,
            |p, cx| match p {
                Pending::Write(rx) => Some(poll_rx(rx, cx)),
                _ => None,
            },
            |shared| Pending::Write(shared.submit(write_op(buf))),
        )
    }

    /// Waits for every operation started before.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pending.is_none() && !this.shared.busy() {
            return Poll::Ready(Ok(()));
        }
        this.poll_op(
            cx,
            |p, cx| match p {
                Pending::Flush(rx) => Some(Pin::new(rx).poll(cx).map(|r| r.map_err(|_| shut_down()))),
                _ => None,
            },
            |shared| Pending::Flush(shared.submit(|_| ())),
        )
    }

    /// Flushes; the descriptor closes when the `File` is dropped.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl futures_io::AsyncSeek for File {
    fn poll_seek(self: Pin<&mut Self>, cx: &mut Context<'_>, pos: SeekFrom) -> Poll<io::Result<u64>> {
        self.get_mut().poll_op(
            cx,
            |p, cx| match p {
                Pending::Seek(rx) => Some(poll_rx(rx, cx)),
                _ => None,
            },
            |shared| Pending::Seek(shared.submit(move |mut f| f.seek(pos))),
        )
    }
}

/// How to open a file ([`std::fs::OpenOptions`]); [`open`](Self::open) runs on the blocking
/// pool.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    std: std::fs::OpenOptions,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// No access and no creation: set at least one of read, write, append.
    pub fn new() -> OpenOptions {
        OpenOptions { std: std::fs::OpenOptions::new() }
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut OpenOptions {
        self.std.read(read);
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.std.write(write);
        self
    }

    /// Open for appending: every write goes to the end of the file.
    pub fn append(&mut self, append: bool) -> &mut OpenOptions {
        self.std.append(append);
        self
    }

    /// Truncate the file to zero length when opening it (needs write access).
    pub fn truncate(&mut self, truncate: bool) -> &mut OpenOptions {
        self.std.truncate(truncate);
        self
    }

    /// Create the file if it does not exist (needs write or append access).
    pub fn create(&mut self, create: bool) -> &mut OpenOptions {
        self.std.create(create);
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists (atomically).
    pub fn create_new(&mut self, create_new: bool) -> &mut OpenOptions {
        self.std.create_new(create_new);
        self
    }

    /// The permission bits of a file this creates (before the umask); `0o666` by default.
    pub fn mode(&mut self, mode: u32) -> &mut OpenOptions {
        std::os::unix::fs::OpenOptionsExt::mode(&mut self.std, mode);
        self
    }

    /// Extra `open(2)` flags (`libc::O_*`), or-ed with those the options give.
    pub fn custom_flags(&mut self, flags: i32) -> &mut OpenOptions {
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut self.std, flags);
        self
    }

    /// Opens `path` with these options.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`open_async`](Self::open_async).
    #[track_caller]
    pub fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let (options, path) = (self.std.clone(), path.as_ref().to_owned());
        offload("fs::OpenOptions::open", move || options.open(path)).map(File::from_std)
    }

    /// The future-side [`open`](Self::open).
    pub fn open_async(
        &self,
        path: impl AsRef<Path>,
    ) -> impl Future<Output = io::Result<File>> + Send + 'static {
        let (options, path) = (self.std.clone(), path.as_ref().to_owned());
        let open = offload_async(move || options.open(path));
        async move { open.await.map(File::from_std) }
    }
}
