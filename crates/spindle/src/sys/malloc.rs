//! glibc's allocator on worker threads.
//!
//! Every spindle fiber and task runs on a worker thread, and glibc gives each thread that
//! allocates its own arena. A per-thread arena gives memory back to the kernel on a free
//! that leaves more than `M_TOP_PAD` free at its top (`heap_trim`: one `madvise`), so a
//! loop that allocates and frees a few hundred KiB per iteration (a 100 KiB gRPC message,
//! an HTTP body) pays a system call and a page fault per 4 KiB page on every iteration, which
//! made a 100 KiB unary call several times slower on a worker than on the main thread (whose
//! arena grows with `brk` and did not trim in the same loop; `docs/perf/scheduler.md`, "glibc
//! arenas and `M_TOP_PAD`"). Raising the top pad keeps up to that much free memory at the
//! top of each arena instead.

/// The top pad spindle sets unless told otherwise (per arena, kept only once an arena has
/// grown that far).
pub(crate) const DEFAULT_TOP_PAD: usize = 8 << 20;

/// Sets glibc's `M_TOP_PAD` to `bytes`, once per process, unless `MALLOC_TOP_PAD_` is set
/// in the environment (then the user's value stands). A no-op on other C libraries.
pub(crate) fn set_top_pad(bytes: usize) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("MALLOC_TOP_PAD_").is_some() {
            return;
        }
        apply(bytes);
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn apply(bytes: usize) {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only updates glibc's allocator parameters (under its own lock); any
    // value is valid for M_TOP_PAD.
    if unsafe { libc::mallopt(libc::M_TOP_PAD, value) } != 1 {
        log::debug!("mallopt(M_TOP_PAD, {value}) was refused");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn apply(_bytes: usize) {}
