//! glibc only: a worker thread's allocator arena keeps freed memory at its top (the runtime
//! raises `M_TOP_PAD`), instead of handing it back to the kernel on every large free.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

/// Bytes of heap glibc's arenas hold from the kernel (all arenas; mmapped chunks excluded).
fn arena_bytes() -> usize {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    unsafe { libc::mallinfo2() }.arena
}

#[test]
fn a_worker_arena_keeps_freed_memory_on_top() {
    let rt = spindle::Runtime::new().unwrap();
    let (held, after) = rt.block_on(|| {
        // Eight 100 KiB blocks: each under glibc's mmap threshold, so they come from this
        // worker's arena and, freed together, leave ~800 KiB free at its top.
        let blocks: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 100 * 1024]).collect();
        let held = arena_bytes();
        drop(std::hint::black_box(blocks));
        (held, arena_bytes())
    });
    // With glibc's default 128 KiB pad the arena would shrink by ~670 KiB here.
    assert!(
        held.saturating_sub(after) < 256 * 1024,
        "the arena gave back {} bytes on free (held {held}, after {after})",
        held.saturating_sub(after)
    );
}
