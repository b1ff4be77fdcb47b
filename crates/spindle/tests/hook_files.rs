//! The `hook` feature on files: `std::fs` and libc's file calls on a fiber run off the worker
//! when they may wait (the blocking pool; a read of cached data on the worker without
//! waiting), with exactly the plain calls' results, file positions and `errno`s.
//!
//! "Parks the fiber, not the worker" is shown by order, never by time: opening a FIFO waits
//! for its other end, which only another fiber of the same (single) worker opens. Were the
//! worker blocked, that fiber could never run; the test then fails at a generous deadline
//! instead of hanging.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{IoSlice, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[path = "support/hang_guard.rs"]
mod hang_guard;

#[path = "support/fifo.rs"]
mod fifo;

/// Runs `f` on a fresh runtime of `workers` workers, under the hang guard.
fn on_runtime<T: Send + 'static>(workers: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    hang_guard::returns_within_hang_limit("the test's runtime", move || {
        let rt = spindle::Builder::new().worker_threads(workers).build().unwrap();
        let out = rt.block_on(f);
        rt.shutdown_timeout(Duration::from_secs(5));
        out
    })
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

#[test]
fn opening_a_fifo_parks_the_fiber_not_the_worker() {
    // One worker: the reader's open waits for a writer, which a second fiber of that worker
    // opens only after the reader's open has started.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fifo");
    fifo::mkfifo(&path);
    let got = on_runtime(1, move || {
        let reader_path = path.clone();
        let started = Arc::new(AtomicUsize::new(0));
        let started_r = started.clone();
        let reader = spindle::spawn(move || {
            started_r.store(1, Ordering::SeqCst);
            File::open(&reader_path).unwrap()
        });
        while started.load(Ordering::SeqCst) == 0 {
            spindle::yield_now();
        }
        let writer = spindle::spawn(move || OpenOptions::new().write(true).open(&path).unwrap());
        let mut writer = writer.join().unwrap();
        let mut reader = reader.join().unwrap();
        // A FIFO is not a file: reads and writes on it pass through (the bytes fit its buffer).
        writer.write_all(b"through the fifo").unwrap();
        drop(writer);
        let mut s = String::new();
        reader.read_to_string(&mut s).unwrap();
        s
    });
    assert_eq!(got, "through the fifo");
}

#[test]
fn std_fs_on_many_fibers_reads_and_writes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let ok = on_runtime(2, move || {
        let fibers: Vec<_> = (0..200)
            .map(|i| {
                let root = root.clone();
                spindle::spawn(move || {
                    let path = root.join(format!("f{i}"));
                    // Larger than one read's worth for some: std reads in several calls.
                    let data: Vec<u8> = (0..(i * 997 + 1)).map(|b| (b * 31 + i) as u8).collect();
                    std::fs::write(&path, &data).unwrap();
                    assert_eq!(std::fs::read(&path).unwrap(), data);
                    assert_eq!(std::fs::metadata(&path).unwrap().len(), data.len() as u64);
                    std::fs::remove_file(&path).unwrap();
                    true
                })
            })
            .collect();
        fibers.into_iter().map(|f| f.join().unwrap()).filter(|&b| b).count()
    });
    assert_eq!(ok, 200);
}

#[test]
fn positions_offsets_and_vectors_are_the_plain_calls() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    on_runtime(1, move || {
        let mut f =
            OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        // write and writev move the position; pwrite does not.
        f.write_all(b"0123456789").unwrap();
        assert_eq!(f.write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")]).unwrap(), 4);
        f.write_all_at(b"XY", 2).unwrap();
        assert_eq!(f.stream_position().unwrap(), 14);
        // read after the end: 0, the position unmoved.
        let mut b = [0u8; 8];
        assert_eq!(f.read(&mut b).unwrap(), 0);
        assert_eq!(f.stream_position().unwrap(), 14);
        // pread at an offset; then read from the position.
        let mut at = [0u8; 4];
        f.read_exact_at(&mut at, 1).unwrap();
        assert_eq!(&at, b"1XY4");
        f.seek(SeekFrom::Start(8)).unwrap();
        // readv across iovecs, short at the end of the file.
        let (mut x, mut y) = ([0u8; 3], [0u8; 8]);
        let n = f.read_vectored(&mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)]).unwrap();
        assert_eq!(n, 6);
        assert_eq!(&x, b"89a");
        assert_eq!(&y[..3], b"bcd");
        assert_eq!(f.stream_position().unwrap(), 14);
        f.sync_all().unwrap();
        f.sync_data().unwrap();
        // O_APPEND writes go to the end whatever the position.
        let mut a = OpenOptions::new().append(true).open(&path).unwrap();
        a.write_all(b"!").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"01XY456789abcd!");
    });
}

#[test]
fn errors_and_errno_are_the_plain_calls() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    on_runtime(1, move || {
        let missing = root.join("missing");
        assert_eq!(File::open(&missing).unwrap_err().kind(), std::io::ErrorKind::NotFound);
        let c = c_path(&missing);
        // SAFETY: a NUL-terminated path; O_RDONLY takes no mode.
        assert_eq!(unsafe { libc::open(c.as_ptr(), libc::O_RDONLY) }, -1);
        assert_eq!(errno(), libc::ENOENT);
        // SAFETY: as above, with openat relative to the working directory.
        assert_eq!(unsafe { libc::openat(libc::AT_FDCWD, c.as_ptr(), libc::O_RDONLY) }, -1);
        assert_eq!(errno(), libc::ENOENT);
        // A write-only file refuses a read with EBADF.
        let path = root.join("wo");
        let wo = File::create(&path).unwrap();
        let mut b = [0u8; 4];
        // SAFETY: `b` is valid for 4 bytes.
        assert_eq!(unsafe { libc::read(wo.as_raw_fd(), b.as_mut_ptr().cast(), 4) }, -1);
        assert_eq!(errno(), libc::EBADF);
        // pread at a negative offset: EINVAL.
        let rw = File::options().read(true).write(true).open(&path).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::pread64(rw.as_raw_fd(), b.as_mut_ptr().cast(), 4, -1) }, -1);
        assert_eq!(errno(), libc::EINVAL);
        // creat makes an empty file; stat and lstat see it, fstatat too.
        let made = root.join("made");
        let cm = c_path(&made);
        // SAFETY: a NUL-terminated path and a mode.
        let fd = unsafe { libc::creat(cm.as_ptr(), 0o600) };
        assert!(fd >= 0, "creat: {}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just opened and is closed once.
        assert_eq!(unsafe { libc::write(fd, b"four".as_ptr().cast(), 4) }, 4);
        // SAFETY: as above.
        unsafe { libc::close(fd) };
        let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
        // SAFETY: a NUL-terminated path and room for one stat.
        assert_eq!(unsafe { libc::stat(cm.as_ptr(), st.as_mut_ptr()) }, 0);
        // SAFETY: stat succeeded.
        assert_eq!(unsafe { st.assume_init() }.st_size, 4);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::lstat(c.as_ptr(), st.as_mut_ptr()) }, -1);
        assert_eq!(errno(), libc::ENOENT);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::fstatat(libc::AT_FDCWD, cm.as_ptr(), st.as_mut_ptr(), 0) }, 0);
    });
}

#[test]
fn a_cancelled_fiber_in_a_waiting_open_returns_once_the_open_ends_then_unwinds() {
    // The reader's open of a FIFO waits on the blocking pool; cancelling the fiber does not
    // cut the call short (the pool thread still works for it): the open completes when a
    // writer comes, then the fiber unwinds at its next park, closing the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fifo");
    fifo::mkfifo(&path);
    let (cancelled, opened) = on_runtime(1, move || {
        let reader_path = path.clone();
        let opened = Arc::new(AtomicUsize::new(0));
        let opened_r = opened.clone();
        let reader = spindle::spawn(move || {
            let f = File::open(&reader_path);
            opened_r.store(if f.is_ok() { 1 } else { 2 }, Ordering::SeqCst);
            spindle::yield_now();
            drop(f);
        });
        spindle::time::sleep(Duration::from_millis(20));
        reader.cancel();
        // A writer from a plain thread lets the pool's open finish.
        let writer = std::thread::spawn(move || OpenOptions::new().write(true).open(&path).unwrap());
        let result = reader.join();
        drop(writer.join().unwrap());
        (result.is_err_and(|e| e.is_cancelled()), opened.load(Ordering::SeqCst))
    });
    assert!(cancelled, "the fiber ends cancelled");
    assert_eq!(opened, 1, "the open that had started completed (the file was opened, then dropped)");
}

#[test]
fn a_plain_thread_on_a_file_a_fiber_used_calls_the_c_library() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("shared");
    std::fs::write(&path, b"shared bytes").unwrap();
    let file = Arc::new(File::open(&path).unwrap());
    let f = file.clone();
    let on_fiber = on_runtime(1, move || {
        let mut b = [0u8; 6];
        f.read_exact_at(&mut b, 0).unwrap();
        b
    });
    let mut b = [0u8; 5];
    file.read_exact_at(&mut b, 7).unwrap();
    assert_eq!(&on_fiber, b"shared");
    assert_eq!(&b, b"bytes");
}

#[test]
fn a_large_file_read_and_written_on_fibers_keeps_every_byte() {
    // Several MiB: the non-waiting attempt may move part of it, the pool the rest.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let ok = on_runtime(2, move || {
        let fibers: Vec<_> = (0..8u8)
            .map(|i| {
                let root = root.clone();
                spindle::spawn(move || {
                    let path = root.join(format!("big{i}"));
                    let data: Vec<u8> =
                        (0..(3 << 20) + usize::from(i)).map(|b| (b % 251) as u8 ^ i).collect();
                    std::fs::write(&path, &data).unwrap();
                    let f = File::open(&path).unwrap();
                    // Evicting the pages (once written back) makes the next read wait for the
                    // disk, when the kernel honours the advice.
                    f.sync_all().unwrap();
                    // SAFETY: advice on an open descriptor; no memory is passed.
                    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                    drop(f);
                    std::fs::read(&path).unwrap() == data
                })
            })
            .collect();
        fibers.into_iter().map(|f| f.join().unwrap()).filter(|&b| b).count()
    });
    assert_eq!(ok, 8);
}

#[test]
fn a_cancelled_fibers_destructor_still_writes_its_file() {
    // Cancellation unwinds the fiber; a destructor that writes a file on the way (a buffered
    // writer's flush, a last log line) must not lose its write.
    struct FlushOnDrop(PathBuf);
    impl Drop for FlushOnDrop {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.0, b"flushed");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flushed");
    let p = path.clone();
    let cancelled = on_runtime(1, move || {
        let (_keep, rx) = spindle::sync::channel::<()>(1);
        let fiber = spindle::spawn(move || {
            let _flush = FlushOnDrop(p);
            let _ = rx.recv(); // parks until cancelled
        });
        spindle::time::sleep(Duration::from_millis(20));
        fiber.cancel();
        fiber.join().is_err_and(|e| e.is_cancelled())
    });
    assert!(cancelled);
    assert_eq!(std::fs::read(&path).unwrap(), b"flushed");
}
