//! [`read_dir`]: a directory's entries, read in batches on the file pool.
//!
//! # Invariants
//!
//! - **One job per batch.** The std iterator moves into a job that reads up to
//!   [`READ_DIR_BATCH`] entries (with each entry's file type, which `readdir` usually reports
//!   itself) and comes back with them; the entries are then handed out one by one without a
//!   hop. A directory of `n` entries costs `n / READ_DIR_BATCH + 1` jobs.
//! - **A batch in flight is never lost.** The job's handle is kept in the [`ReadDir`] until
//!   its batch is taken, so a [`next_entry_async`](ReadDir::next_entry_async) future dropped
//!   mid-batch leaves the batch to the next call, which waits for that job rather than starting
//!   another: no entry is skipped or read twice.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::fs::{FileType, Metadata};
use std::future::{poll_fn, Future};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::pool::{joined, offload, offload_async, on_worker_pool};
use crate::blocking::BlockingHandle;
use crate::sched::caller::{blocking_caller, Caller};

/// How many entries one blocking-pool job reads from a directory.
pub const READ_DIR_BATCH: usize = 128;

/// The entries of `path` ([`std::fs::read_dir`]), as an iterator that parks the fiber while a
/// batch is read. The open is one job; `NotFound` and `NotADirectory` come from it, as in std.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let names = rt.block_on(|| {
///     let dir = std::env::temp_dir().join(format!("spindle-read-dir-doc-{}", std::process::id()));
///     spindle::fs::create_dir_all(&dir)?;
///     spindle::fs::write(dir.join("a"), b"")?;
///     let names: Vec<_> =
///         spindle::fs::read_dir(&dir)?.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>()?;
///     spindle::fs::remove_dir_all(&dir)?;
///     std::io::Result::Ok(names)
/// });
/// assert_eq!(names.unwrap(), ["a"]);
/// ```
///
/// # Panics
///
/// In an async task on a spindle worker: use [`read_dir_async`] and
/// [`ReadDir::next_entry_async`] there.
#[track_caller]
pub fn read_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    let path = path.as_ref().to_owned();
    offload("fs::read_dir", move || std::fs::read_dir(path)).map(ReadDir::new)
}

/// The future-side [`read_dir`]; take the entries with [`ReadDir::next_entry_async`].
pub fn read_dir_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<ReadDir>> + Send + 'static {
    let path = path.as_ref().to_owned();
    let open = offload_async(move || std::fs::read_dir(path));
    async move { open.await.map(ReadDir::new) }
}

/// One batch: the std iterator back (`None` once it is exhausted) and the entries read.
type Batch = (Option<std::fs::ReadDir>, VecDeque<io::Result<DirEntry>>);

/// The entries of a directory (see [`read_dir`]). As an `Iterator` it is blocking-style (a
/// fiber parks while a batch is read); tasks use [`next_entry_async`](Self::next_entry_async).
pub struct ReadDir {
    /// The std iterator, while no job holds it; `None` once exhausted or while in a job.
    std: Option<std::fs::ReadDir>,
    /// Entries read and not yet handed out.
    ready: VecDeque<io::Result<DirEntry>>,
    /// The job reading the next batch, if one is under way.
    pending: Option<BlockingHandle<Batch>>,
}

impl fmt::Debug for ReadDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadDir").field("ready", &self.ready.len()).finish_non_exhaustive()
    }
}

/// Reads up to [`READ_DIR_BATCH`] entries from `std`.
fn read_batch(mut std: std::fs::ReadDir) -> Batch {
    let mut entries = VecDeque::with_capacity(READ_DIR_BATCH);
    for _ in 0..READ_DIR_BATCH {
        match std.next() {
            Some(entry) => entries.push_back(entry.map(DirEntry::new)),
            None => return (None, entries),
        }
    }
    (Some(std), entries)
}

impl ReadDir {
    fn new(std: std::fs::ReadDir) -> ReadDir {
        ReadDir { std: Some(std), ready: VecDeque::new(), pending: None }
    }

    fn take_batch(&mut self, (std, entries): Batch) {
        self.std = std;
        self.ready = entries;
    }

    /// The next entry, or `Ok(None)` at the end: the future-side `Iterator::next`, for async
    /// tasks. Dropping the future mid-batch loses nothing (module doc).
    pub async fn next_entry_async(&mut self) -> io::Result<Option<DirEntry>> {
        poll_fn(|cx| self.poll_next_entry(cx)).await
    }

    /// Polls for the next entry (see [`next_entry_async`](Self::next_entry_async)).
    pub fn poll_next_entry(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<DirEntry>>> {
        loop {
            if let Some(entry) = self.ready.pop_front() {
                return Poll::Ready(entry.map(Some));
            }
            if let Some(pending) = self.pending.as_mut() {
                let batch = match Pin::new(pending).poll(cx) {
                    Poll::Ready(done) => joined(done.map(Ok)),
                    Poll::Pending => return Poll::Pending,
                };
                self.pending = None;
                self.take_batch(batch?);
                continue;
            }
            let Some(std) = self.std.take() else { return Poll::Ready(Ok(None)) };
            match on_worker_pool() {
                Some(services) => self.pending = Some(services.files.spawn(move || read_batch(std))),
                None => self.take_batch(read_batch(std)),
            }
        }
    }
}

impl Iterator for ReadDir {
    type Item = io::Result<DirEntry>;

    /// The next entry; when the batch read is used up, reads the next one (parking the fiber).
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`ReadDir::next_entry_async`] there.
    #[track_caller]
    fn next(&mut self) -> Option<io::Result<DirEntry>> {
        loop {
            if let Some(entry) = self.ready.pop_front() {
                return Some(entry);
            }
            if let Some(pending) = self.pending.take() {
                blocking_caller("fs::read_dir");
                match joined(pending.join().map(Ok)) {
                    Ok(batch) => self.take_batch(batch),
                    Err(e) => return Some(Err(e)),
                }
                continue;
            }
            let std = self.std.take()?;
            let batch = match blocking_caller("fs::read_dir") {
                Caller::Thread => read_batch(std),
                Caller::Fiber(_) => match crate::services::services() {
                    Some(services) => {
                        match joined(services.files.spawn(move || read_batch(std)).join().map(Ok)) {
                            Ok(batch) => batch,
                            Err(e) => return Some(Err(e)),
                        }
                    }
                    None => read_batch(std),
                },
            };
            self.take_batch(batch);
        }
    }
}

/// An entry of a directory: its name, path and file type were read with the batch; its
/// metadata is one more job.
pub struct DirEntry {
    std: std::fs::DirEntry,
    file_type: io::Result<FileType>,
}

impl fmt::Debug for DirEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DirEntry").field(&self.std.path()).finish()
    }
}

impl DirEntry {
    fn new(std: std::fs::DirEntry) -> DirEntry {
        let file_type = std.file_type();
        DirEntry { std, file_type }
    }

    /// The entry's full path: the directory's path joined with [`file_name`](Self::file_name).
    pub fn path(&self) -> PathBuf {
        self.std.path()
    }

    /// The entry's name within its directory.
    pub fn file_name(&self) -> OsString {
        self.std.file_name()
    }

    /// The entry's file type (not following a symbolic link), as read with the batch.
    pub fn file_type(&self) -> io::Result<FileType> {
        match &self.file_type {
            Ok(t) => Ok(*t),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        }
    }

    /// The entry's metadata, not following a symbolic link ([`std::fs::DirEntry::metadata`]).
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`metadata_async`](Self::metadata_async).
    #[track_caller]
    pub fn metadata(&self) -> io::Result<Metadata> {
        let path = self.path();
        offload("fs::DirEntry::metadata", move || std::fs::symlink_metadata(path))
    }

    /// The future-side [`metadata`](Self::metadata).
    pub fn metadata_async(&self) -> impl Future<Output = io::Result<Metadata>> + Send + 'static {
        let path = self.path();
        offload_async(move || std::fs::symlink_metadata(path))
    }

    /// The inode number of the entry, as read with the batch.
    pub fn ino(&self) -> u64 {
        std::os::unix::fs::DirEntryExt::ino(&self.std)
    }
}
