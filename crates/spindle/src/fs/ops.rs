//! The free functions of [`spindle::fs`](super): each runs the `std::fs` function of the same
//! name as one job on the file pool (module doc of `fs`), in a blocking-style form for
//! fibers and plain threads and an `_async` form for tasks.
//!
//! The arguments are copied into owned values (`PathBuf`, `Vec<u8>`) for the job, so the
//! futures of the `_async` forms are `Send + 'static` whatever was passed: spawn them, or
//! bound them with [`time::timeout`](crate::time::timeout).

use std::fs::{Metadata, Permissions};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};

use super::pool::{offload, offload_async};

/// Reads the whole file at `path` ([`std::fs::read`]): one job, whatever the file's size.
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`read_async`].
#[track_caller]
pub fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let path = path.as_ref().to_owned();
    offload("fs::read", move || std::fs::read(path))
}

/// The future-side [`read`], for async tasks.
pub fn read_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<Vec<u8>>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::read(path))
}

/// Reads the whole file at `path` as UTF-8 ([`std::fs::read_to_string`]); invalid UTF-8 is an
/// `InvalidData` error.
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`read_to_string_async`].
#[track_caller]
pub fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    let path = path.as_ref().to_owned();
    offload("fs::read_to_string", move || std::fs::read_to_string(path))
}

/// The future-side [`read_to_string`], for async tasks.
pub fn read_to_string_async(
    path: impl AsRef<Path>,
) -> impl Future<Output = io::Result<String>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::read_to_string(path))
}

/// Writes `contents` to the file at `path`, creating or truncating it ([`std::fs::write`]). The
/// bytes are copied for the job.
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`write_async`].
#[track_caller]
pub fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    let contents = contents.as_ref().to_vec();
    offload("fs::write", move || std::fs::write(path, contents))
}

/// The future-side [`write()`], for async tasks.
pub fn write_async(
    path: impl AsRef<Path>,
    contents: impl AsRef<[u8]>,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let path = path.as_ref().to_owned();
    let contents = contents.as_ref().to_vec();
    offload_async(move || std::fs::write(path, contents))
}

/// The metadata of `path`, following symbolic links ([`std::fs::metadata`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`metadata_async`].
#[track_caller]
pub fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    let path = path.as_ref().to_owned();
    offload("fs::metadata", move || std::fs::metadata(path))
}

/// The future-side [`metadata`], for async tasks.
pub fn metadata_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<Metadata>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::metadata(path))
}

/// The metadata of `path` itself, not following a symbolic link ([`std::fs::symlink_metadata`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use
/// [`symlink_metadata_async`].
#[track_caller]
pub fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    let path = path.as_ref().to_owned();
    offload("fs::symlink_metadata", move || std::fs::symlink_metadata(path))
}

/// The future-side [`symlink_metadata`], for async tasks.
pub fn symlink_metadata_async(
    path: impl AsRef<Path>,
) -> impl Future<Output = io::Result<Metadata>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::symlink_metadata(path))
}

/// Creates the directory `path` ([`std::fs::create_dir`]): `AlreadyExists` if it exists, `NotFound`
/// if its parent does not.
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`create_dir_async`].
#[track_caller]
pub fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    offload("fs::create_dir", move || std::fs::create_dir(path))
}

/// The future-side [`create_dir`], for async tasks.
pub fn create_dir_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::create_dir(path))
}

/// Creates `path` and its missing parents ([`std::fs::create_dir_all`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`create_dir_all_async`].
#[track_caller]
pub fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    offload("fs::create_dir_all", move || std::fs::create_dir_all(path))
}

/// The future-side [`create_dir_all`], for async tasks.
pub fn create_dir_all_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::create_dir_all(path))
}

/// Removes the file `path` ([`std::fs::remove_file`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`remove_file_async`].
#[track_caller]
pub fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    offload("fs::remove_file", move || std::fs::remove_file(path))
}

/// The future-side [`remove_file`], for async tasks.
pub fn remove_file_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::remove_file(path))
}

/// Removes the empty directory `path` ([`std::fs::remove_dir`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`remove_dir_async`].
#[track_caller]
pub fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    offload("fs::remove_dir", move || std::fs::remove_dir(path))
}

/// The future-side [`remove_dir`], for async tasks.
pub fn remove_dir_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::remove_dir(path))
}

/// Removes `path` and everything below it ([`std::fs::remove_dir_all`]), as one job.
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`remove_dir_all_async`].
#[track_caller]
pub fn remove_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    offload("fs::remove_dir_all", move || std::fs::remove_dir_all(path))
}

/// The future-side [`remove_dir_all`], for async tasks.
pub fn remove_dir_all_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::remove_dir_all(path))
}

/// Renames `from` to `to`, replacing `to` if it is a file ([`std::fs::rename`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`rename_async`].
#[track_caller]
pub fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let from = from.as_ref().to_owned();
    let to = to.as_ref().to_owned();
    offload("fs::rename", move || std::fs::rename(from, to))
}

/// The future-side [`rename`], for async tasks.
pub fn rename_async(
    from: impl AsRef<Path>,
    to: impl AsRef<Path>,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let from = from.as_ref().to_owned();
    let to = to.as_ref().to_owned();
    offload_async(move || std::fs::rename(from, to))
}

/// Copies the contents and permissions of `from` to `to` and returns the number of bytes copied
/// ([`std::fs::copy`]; in-kernel `copy_file_range` where the file system allows).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`copy_async`].
#[track_caller]
pub fn copy(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<u64> {
    let from = from.as_ref().to_owned();
    let to = to.as_ref().to_owned();
    offload("fs::copy", move || std::fs::copy(from, to))
}

/// The future-side [`copy`], for async tasks.
pub fn copy_async(
    from: impl AsRef<Path>,
    to: impl AsRef<Path>,
) -> impl Future<Output = io::Result<u64>> + Send + 'static {
    let from = from.as_ref().to_owned();
    let to = to.as_ref().to_owned();
    offload_async(move || std::fs::copy(from, to))
}

/// Makes `link` a new name of `original` ([`std::fs::hard_link`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`hard_link_async`].
#[track_caller]
pub fn hard_link(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    let original = original.as_ref().to_owned();
    let link = link.as_ref().to_owned();
    offload("fs::hard_link", move || std::fs::hard_link(original, link))
}

/// The future-side [`hard_link`], for async tasks.
pub fn hard_link_async(
    original: impl AsRef<Path>,
    link: impl AsRef<Path>,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let original = original.as_ref().to_owned();
    let link = link.as_ref().to_owned();
    offload_async(move || std::fs::hard_link(original, link))
}

/// The absolute path of `path` with every symbolic link and `.`/`..` resolved
/// ([`std::fs::canonicalize`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`canonicalize_async`].
#[track_caller]
pub fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let path = path.as_ref().to_owned();
    offload("fs::canonicalize", move || std::fs::canonicalize(path))
}

/// The future-side [`canonicalize`], for async tasks.
pub fn canonicalize_async(
    path: impl AsRef<Path>,
) -> impl Future<Output = io::Result<PathBuf>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::canonicalize(path))
}

/// The target of the symbolic link `path` ([`std::fs::read_link`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`read_link_async`].
#[track_caller]
pub fn read_link(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let path = path.as_ref().to_owned();
    offload("fs::read_link", move || std::fs::read_link(path))
}

/// The future-side [`read_link`], for async tasks.
pub fn read_link_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<PathBuf>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::read_link(path))
}

/// Sets the permissions of `path` ([`std::fs::set_permissions`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`set_permissions_async`].
#[track_caller]
pub fn set_permissions(path: impl AsRef<Path>, perm: Permissions) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    offload("fs::set_permissions", move || std::fs::set_permissions(path, perm))
}

/// The future-side [`set_permissions`], for async tasks.
pub fn set_permissions_async(
    path: impl AsRef<Path>,
    perm: Permissions,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::set_permissions(path, perm))
}

/// Whether `path` exists (following symbolic links): `Ok(false)` for a broken link, `Err` when it
/// cannot be told, e.g. for lack of permission ([`std::fs::exists`]).
///
/// # Panics
///
/// In an async task on a spindle worker (it would block the worker): use [`try_exists_async`].
#[track_caller]
pub fn try_exists(path: impl AsRef<Path>) -> io::Result<bool> {
    let path = path.as_ref().to_owned();
    offload("fs::try_exists", move || std::fs::exists(path))
}

/// The future-side [`try_exists`], for async tasks.
pub fn try_exists_async(path: impl AsRef<Path>) -> impl Future<Output = io::Result<bool>> + Send + 'static {
    let path = path.as_ref().to_owned();
    offload_async(move || std::fs::exists(path))
}
