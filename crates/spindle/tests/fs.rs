//! spindle::fs: the std::fs surface from fibers (parking only the fiber), from async tasks
//! (the `_async` forms and futures-io on `File`) and from plain threads; errors as std's;
//! a `File`'s operations kept in order.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use spindle::fs::{self, File};
use spindle::{Builder, Runtime};

#[path = "support/hang_guard.rs"]
mod hang_guard;
use hang_guard::returns_within_hang_limit;

#[path = "support/fifo.rs"]
mod fifo;
#[path = "support/futures_io_util.rs"]
mod futures_io_util;
use fifo::mkfifo;

fn runtime(workers: usize) -> Runtime {
    Builder::new().worker_threads(workers).build().unwrap()
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Distinct contents for file `i`: its length and bytes differ from every other file's.
fn contents(i: usize) -> Vec<u8> {
    (0..4096 + i * 37).map(|j| (i * 7 + j) as u8).collect()
}

#[test]
fn two_hundred_fibers_write_and_read_back_their_own_files() {
    let dir = temp_dir();
    let base = dir.path().to_owned();
    let rt = runtime(2);
    let checked = rt.block_on(move || {
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let base = base.clone();
                spindle::spawn(move || {
                    let path = base.join(format!("f{i}"));
                    let want = contents(i);
                    if i % 2 == 0 {
                        fs::write(&path, &want).unwrap();
                        assert_eq!(fs::read(&path).unwrap(), want, "file {i}");
                    } else {
                        let mut f = File::create(&path).unwrap();
                        f.write_all(&want).unwrap();
                        drop(f);
                        let mut got = Vec::new();
                        File::open(&path).unwrap().read_to_end(&mut got).unwrap();
                        assert_eq!(got, want, "file {i}");
                    }
                    assert_eq!(fs::metadata(&path).unwrap().len(), want.len() as u64);
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).count()
    });
    assert_eq!(checked, 200);
    // And once more from this plain thread (the calls run on it).
    for i in [0, 1, 199] {
        assert_eq!(fs::read(dir.path().join(format!("f{i}"))).unwrap(), contents(i));
    }
}

/// A read of a FIFO cannot finish before a writer opens it and writes: if `fs::read` ran on
/// the worker thread, the single worker would wait in `open(2)` for ever, the writer fiber
/// (on the same worker) could never start, and the test would hang (the hang guard fails it).
/// It finishes only if the writer fiber ran while the read was in flight.
#[test]
fn a_large_read_parks_only_its_fiber() {
    let dir = temp_dir();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let payload: Vec<u8> = (0..8 * 1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let (got, writer_ran, want) = returns_within_hang_limit("fs::read of a FIFO whose writer is a fiber", {
        let fifo = fifo.clone();
        move || {
            let rt = runtime(1);
            let ran = Arc::new(AtomicBool::new(false));
            let got = rt.block_on({
                let ran = ran.clone();
                let payload = payload.clone();
                move || {
                    let reader = spindle::spawn({
                        let fifo = fifo.clone();
                        move || fs::read(&fifo).unwrap()
                    });
                    let writer = spindle::spawn(move || {
                        ran.store(true, Ordering::SeqCst);
                        fs::write(&fifo, &payload).unwrap();
                    });
                    let got = reader.join().unwrap();
                    writer.join().unwrap();
                    got
                }
            });
            (got, ran.load(Ordering::SeqCst), payload)
        }
    });
    assert!(writer_ran);
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the bytes read differ from those written");
}

#[test]
fn file_read_write_seek_round_trips() {
    let dir = temp_dir();
    let path = dir.path().join("rw");
    let rt = runtime(1);
    rt.block_on(move || {
        let mut f = File::options().read(true).write(true).create_new(true).open(&path).unwrap();
        f.write_all(b"hello, world").unwrap();
        assert_eq!(f.stream_position().unwrap(), 12);
        assert_eq!(f.seek(SeekFrom::Start(7)).unwrap(), 7);
        let mut word = [0; 5];
        f.read_exact(&mut word).unwrap();
        assert_eq!(&word, b"world");
        assert_eq!(f.read(&mut word).unwrap(), 0, "at the end");
        f.seek(SeekFrom::Current(-5)).unwrap();
        f.write_all(b"fiber").unwrap();
        f.seek(SeekFrom::End(-12)).unwrap();
        let mut all = String::new();
        f.read_to_string(&mut all).unwrap();
        assert_eq!(all, "hello, fiber");
        f.set_len(5).unwrap();
        f.sync_all().unwrap();
        f.sync_data().unwrap();
        assert_eq!(f.metadata().unwrap().len(), 5);
        f.flush().unwrap();
        // A read of more than MAX_IO_BYTES is short but correct; read_exact continues it.
        let big: Vec<u8> = (0..fs::MAX_IO_BYTES + 1000).map(|i| (i % 253) as u8).collect();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(&big).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut back = vec![0; big.len()];
        f.read_exact(&mut back).unwrap();
        assert!(back == big);
        assert_eq!(fs::read(&path).unwrap().len(), big.len());
    });
}

/// Two fibers on two workers append numbered records through one shared `File`: every record
/// lands whole, and each fiber's records keep their order.
#[test]
fn a_file_shared_by_two_fibers_keeps_each_write_whole_and_in_order() {
    let dir = temp_dir();
    let path = dir.path().join("shared");
    let rt = runtime(2);
    let file = Arc::new(File::create(&path).unwrap());
    rt.block_on(move || {
        let writers: Vec<_> = (0..2u8)
            .map(|w| {
                let file = file.clone();
                spindle::spawn(move || {
                    for n in 0..500u32 {
                        let mut record = [b'a' + w; 16];
                        record[..4].copy_from_slice(&n.to_be_bytes());
                        (&*file).write_all(&record).unwrap();
                    }
                })
            })
            .collect();
        writers.into_iter().for_each(|h| h.join().unwrap());
    });
    let data = std::fs::read(&path).unwrap();
    assert_eq!(data.len(), 2 * 500 * 16);
    let mut next = [0u32; 2];
    for record in data.chunks(16) {
        let w = (record[4] - b'a') as usize;
        assert!(w < 2 && record[4..].iter().all(|&b| b == record[4]), "a torn record: {record:?}");
        assert_eq!(u32::from_be_bytes(record[..4].try_into().unwrap()), next[w], "writer {w} out of order");
        next[w] += 1;
    }
}

/// Runs `f` on the result of the std call and of the spindle call (from a fiber) and compares
/// the error kinds.
fn same_error_kind<T: std::fmt::Debug, U: std::fmt::Debug + Send + 'static>(
    what: &str,
    std_call: impl FnOnce() -> io::Result<T>,
    spindle_call: impl FnOnce() -> io::Result<U> + Send + 'static,
) {
    let want = std_call().expect_err(what).kind();
    let rt = runtime(1);
    let got = rt.block_on(spindle_call).expect_err(what).kind();
    assert_eq!(got, want, "{what}");
}

#[test]
fn errors_have_std_kinds() {
    let dir = temp_dir();
    let d = dir.path().to_owned();
    let missing = d.join("missing");
    std::fs::create_dir(d.join("full")).unwrap();
    std::fs::write(d.join("full/x"), b"x").unwrap();
    std::fs::write(d.join("bad-utf8"), [0xff, 0xfe]).unwrap();

    let m = missing.clone();
    same_error_kind("read missing", || std::fs::read(&missing), move || fs::read(m));
    let m = missing.clone();
    same_error_kind("open missing", || std::fs::File::open(&missing), move || File::open(m));
    let m = missing.clone();
    same_error_kind("metadata missing", || std::fs::metadata(&missing), move || fs::metadata(m));
    let m = missing.clone();
    same_error_kind("read_dir missing", || std::fs::read_dir(&missing), move || fs::read_dir(m));
    let dd = d.clone();
    same_error_kind("create_dir existing", || std::fs::create_dir(&d), move || fs::create_dir(dd));
    let full = d.join("full");
    let f2 = full.clone();
    same_error_kind("remove_dir non-empty", || std::fs::remove_dir(&full), move || fs::remove_dir(f2));
    let x = d.join("full/x");
    let x2 = x.clone();
    same_error_kind(
        "create_new existing",
        || std::fs::File::options().write(true).create_new(true).open(&x),
        move || File::options().write(true).create_new(true).open(x2),
    );
    let bad = d.join("bad-utf8");
    let b2 = bad.clone();
    same_error_kind("invalid UTF-8", || std::fs::read_to_string(&bad), move || fs::read_to_string(b2));
    let m = missing.clone();
    same_error_kind("rename missing", || std::fs::rename(&missing, d.join("y")), {
        let y = d.join("y");
        move || fs::rename(m, y)
    });
    let m = missing.clone();
    same_error_kind("read_link of a non-link", || std::fs::read_link(d.join("full/x")), {
        let x = d.join("full/x");
        move || fs::read_link(x).map(|_| drop(m))
    });
    assert_eq!(missing.exists(), fs::try_exists(&missing).unwrap());
}

#[test]
fn the_other_functions_do_what_std_does() {
    let dir = temp_dir();
    let d = dir.path().to_owned();
    let rt = runtime(1);
    rt.block_on(move || {
        fs::create_dir_all(d.join("a/b/c")).unwrap();
        assert!(fs::metadata(d.join("a/b/c")).unwrap().is_dir());
        fs::write(d.join("a/one"), b"1").unwrap();
        assert_eq!(fs::copy(d.join("a/one"), d.join("a/two")).unwrap(), 1);
        fs::hard_link(d.join("a/two"), d.join("a/three")).unwrap();
        std::os::unix::fs::symlink(d.join("a/one"), d.join("a/link")).unwrap();
        assert_eq!(fs::read_link(d.join("a/link")).unwrap(), d.join("a/one"));
        assert!(fs::symlink_metadata(d.join("a/link")).unwrap().file_type().is_symlink());
        assert!(fs::metadata(d.join("a/link")).unwrap().is_file());
        assert_eq!(
            fs::canonicalize(d.join("a/b/../link")).unwrap(),
            std::fs::canonicalize(d.join("a/one")).unwrap()
        );
        fs::rename(d.join("a/three"), d.join("a/four")).unwrap();
        assert!(!fs::try_exists(d.join("a/three")).unwrap());
        assert_eq!(fs::read(d.join("a/four")).unwrap(), b"1");
        let mut perm = fs::metadata(d.join("a/four")).unwrap().permissions();
        perm.set_readonly(true);
        fs::set_permissions(d.join("a/four"), perm).unwrap();
        assert!(fs::metadata(d.join("a/four")).unwrap().permissions().readonly());
        fs::remove_file(d.join("a/one")).unwrap();
        fs::remove_dir(d.join("a/b/c")).unwrap();
        fs::remove_dir_all(d.join("a")).unwrap();
        assert!(!fs::try_exists(d.join("a")).unwrap());
    });
}

fn thousand_entries() -> (tempfile::TempDir, Vec<String>) {
    let dir = temp_dir();
    let mut names: Vec<String> = (0..1000).map(|i| format!("entry-{i:04}")).collect();
    for (i, name) in names.iter().enumerate() {
        if i % 100 == 0 {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        } else {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
    }
    names.sort();
    (dir, names)
}

#[test]
fn read_dir_lists_a_thousand_entries_from_a_fiber() {
    let (dir, want) = thousand_entries();
    let path = dir.path().to_owned();
    let rt = runtime(1);
    let (mut names, dirs) = rt.block_on(move || {
        let mut names = Vec::new();
        let mut dirs = 0;
        for entry in fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap();
            assert_eq!(entry.path(), path.join(entry.file_name()));
            if entry.file_type().unwrap().is_dir() {
                dirs += 1;
                assert!(entry.metadata().unwrap().is_dir());
            }
            names.push(entry.file_name().into_string().unwrap());
        }
        (names, dirs)
    });
    names.sort();
    assert_eq!(names, want);
    assert_eq!(dirs, 10);
}

/// From a task, with futures dropped in the middle of a batch: no entry is lost or repeated.
#[test]
fn read_dir_async_lists_a_thousand_entries_from_a_task() {
    let (dir, want) = thousand_entries();
    let path = dir.path().to_owned();
    let rt = runtime(2);
    let mut names = rt
        .spawn_async(async move {
            let mut entries = fs::read_dir_async(&path).await.unwrap();
            let mut names = Vec::new();
            let mut abandoned = 0;
            loop {
                // Every tenth call: poll once and drop the future.
                if names.len() % 10 == 0 && abandoned < 50 {
                    abandoned += 1;
                    let mut once = std::pin::pin!(entries.next_entry_async());
                    let polled =
                        std::future::poll_fn(|cx| std::task::Poll::Ready(once.as_mut().poll(cx))).await;
                    if let std::task::Poll::Ready(entry) = polled {
                        match entry.unwrap() {
                            Some(e) => names.push(e.file_name().into_string().unwrap()),
                            None => break,
                        }
                    }
                    continue;
                }
                match entries.next_entry_async().await.unwrap() {
                    Some(e) => names.push(e.file_name().into_string().unwrap()),
                    None => break,
                }
            }
            names
        })
        .join()
        .unwrap();
    names.sort();
    assert_eq!(names, want);
}

use std::future::Future;

#[test]
fn async_forms_from_a_task() {
    use futures_io_util::{flush, read_to_end, seek, write_all};
    let dir = temp_dir();
    let d = dir.path().to_owned();
    let rt = runtime(2);
    rt.spawn_async(async move {
        fs::create_dir_all_async(d.join("sub")).await.unwrap();
        fs::write_async(d.join("sub/a"), b"alpha").await.unwrap();
        assert_eq!(fs::read_async(d.join("sub/a")).await.unwrap(), b"alpha");
        assert_eq!(fs::read_to_string_async(d.join("sub/a")).await.unwrap(), "alpha");
        assert_eq!(fs::metadata_async(d.join("sub/a")).await.unwrap().len(), 5);
        fs::rename_async(d.join("sub/a"), d.join("sub/b")).await.unwrap();
        assert_eq!(fs::copy_async(d.join("sub/b"), d.join("sub/c")).await.unwrap(), 5);
        assert!(fs::try_exists_async(d.join("sub/c")).await.unwrap());
        let err = fs::read_async(d.join("sub/a")).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);

        let mut f =
            File::options().read(true).write(true).create(true).open_async(d.join("f")).await.unwrap();
        write_all(&mut f, b"0123456789").await.unwrap();
        flush(&mut f).await.unwrap();
        assert_eq!(seek(&mut f, SeekFrom::Start(4)).await.unwrap(), 4);
        assert_eq!(read_to_end(&mut f).await.unwrap(), b"456789");
        f.set_len_async(3).await.unwrap();
        f.sync_all_async().await.unwrap();
        assert_eq!(f.metadata_async().await.unwrap().len(), 3);
        let mut f = File::open_async(d.join("f")).await.unwrap();
        assert_eq!(read_to_end(&mut f).await.unwrap(), b"012");
        fs::remove_dir_all_async(&d).await.unwrap();
        assert!(!fs::try_exists_async(&d).await.unwrap());
    })
    .join()
    .unwrap();
}

/// A write whose future is dropped after its first poll still runs, before anything started
/// after it: "AAAA" then (seek to 0, "BB") gives "BBAA", never "BBAAAA" or "AAAA".
#[test]
fn an_abandoned_async_write_runs_before_later_operations() {
    use futures_io_util::{flush, seek, write_all};
    let dir = temp_dir();
    let path = dir.path().join("order");
    let rt = runtime(1);
    let p = path.clone();
    rt.spawn_async(async move {
        let mut f = File::create_async(&p).await.unwrap();
        // Usually pending (the write runs on the pool); ready if the pool was quicker.
        let _first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::pin::Pin::new(&mut f).poll_write_abandon(cx, b"AAAA"))
        })
        .await;
        assert_eq!(seek(&mut f, SeekFrom::Start(0)).await.unwrap(), 0);
        write_all(&mut f, b"BB").await.unwrap();
        flush(&mut f).await.unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"BBAA");
}

/// `poll_write` under another name, so that the test reads as what it does.
trait PollWriteAbandon {
    fn poll_write_abandon(
        self,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>>;
}

impl PollWriteAbandon for std::pin::Pin<&mut File> {
    fn poll_write_abandon(
        self,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        futures_io::AsyncWrite::poll_write(self, cx, buf)
    }
}

#[test]
fn a_blocking_fs_call_in_a_task_panics_naming_the_async_form() {
    let rt = runtime(1);
    let err = rt.spawn_async(async { fs::read("/nonexistent") }).join().unwrap_err();
    let payload = err.into_panic();
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("`fs::read` is a blocking-style call"), "{message}");
    assert!(message.contains("read_async"), "{message}");
}

#[test]
fn on_a_plain_thread_the_calls_run_on_the_thread() {
    let dir = temp_dir();
    let path: PathBuf = dir.path().join("plain");
    fs::write(&path, b"plain").unwrap();
    let mut f = File::options().read(true).write(true).open(&path).unwrap();
    f.seek(SeekFrom::End(0)).unwrap();
    f.write_all(b" thread").unwrap();
    f.rewind().unwrap();
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s, "plain thread");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}
