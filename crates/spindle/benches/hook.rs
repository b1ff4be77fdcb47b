//! What the `hook` feature costs a call that is not made on a fiber: the interposed `write`
//! (which looks at the calling thread, then calls the C library's) beside the C library's
//! `write` called directly (found with `dlsym(RTLD_NEXT)`, as the hook finds it), both
//! writing one byte to `/dev/null` from a plain thread.
//!
//! Run with `cargo bench -p spindle --features hook --bench hook`. Nothing here asserts.

use std::os::fd::AsRawFd;

use criterion::{criterion_group, criterion_main, Criterion};

type Write = unsafe extern "C" fn(libc::c_int, *const libc::c_void, libc::size_t) -> libc::ssize_t;

fn off_fiber(c: &mut Criterion) {
    // Built once so that the hook is linked in (a runtime's builder refers to it).
    let _rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
    let fd = null.as_raw_fd();
    // SAFETY: a NUL-terminated name; the next definition of `write` is the C library's.
    let glibc: Write = unsafe {
        std::mem::transmute::<*mut libc::c_void, Write>(libc::dlsym(libc::RTLD_NEXT, c"write".as_ptr()))
    };
    let byte = [0u8; 1];
    let mut group = c.benchmark_group("off_fiber");
    group.bench_function("write/hooked", |b| {
        // SAFETY: a valid descriptor and a one-byte buffer.
        b.iter(|| unsafe { libc::write(fd, byte.as_ptr().cast(), 1) })
    });
    group.bench_function("write/glibc", |b| {
        // SAFETY: as above, through the C library's own definition.
        b.iter(|| unsafe { glibc(fd, byte.as_ptr().cast(), 1) })
    });
    group.finish();
}

criterion_group!(benches, off_fiber);
criterion_main!(benches);
