//! Architecture back ends of the context switch.
//!
//! Every back end exports the same two items:
//!
//! - `unsafe fn switch(save: *mut usize, to: usize, arg: usize) -> usize`: saves the
//!   callee-saved state of the running context on its own stack, stores the resulting stack
//!   pointer in `*save`, loads the context whose saved stack pointer is `to` and resumes it.
//!   The resumed context sees `arg` as the return value of its own `switch` call (or, for a
//!   fresh stack, as the first argument of its entry function).
//! - `unsafe fn init_stack(top, entry, data) -> usize`: writes an initial frame below `top` so
//!   that the first `switch` to the returned stack pointer calls `entry(arg, data)` on that
//!   stack. `entry` must never return.
//! - `unsafe fn link_stack(top, slot)`: links a fresh stack to the context that saves its
//!   stack pointer in `*slot`, so that unwinders continue from the fiber into that context's
//!   frames (x86_64; a no-op on aarch64).
//!
//! Contract shared by all back ends: the stack passed to `init_stack` must be writable from
//! `top` down for at least [`INIT_FRAME_BYTES`] and must have a guard page below it; `top` must
//! be 16-byte aligned. A saved stack pointer may be resumed exactly once.

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
#[allow(unused_imports)] // INIT_FRAME_BYTES documents the contract and is used by tests
pub(crate) use x86_64::{init_stack, link_stack, switch, INIT_FRAME_BYTES};

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "aarch64")]
#[allow(unused_imports)]
pub(crate) use aarch64::{init_stack, link_stack, switch, INIT_FRAME_BYTES};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("spindle supports x86_64 and aarch64 Linux only");

/// The signature of a fiber's first function: `(arg passed by switch, data given to init_stack)`.
pub(crate) type EntryFn = unsafe extern "C" fn(arg: usize, data: *mut u8) -> !;

/// Measures `n` raw round trips (resume a context, which suspends straight back) on a fresh
/// stack, outside any scheduler: the floor of every fiber switch. For the benchmarks.
pub(crate) fn raw_round_trips(n: u64) -> std::io::Result<std::time::Duration> {
    use std::cell::Cell;

    /// The two saved stack pointers, shared by the two contexts (one thread, so `Cell`s).
    struct Pair {
        main: Cell<usize>,
        side: Cell<usize>,
    }

    unsafe extern "C" fn bounce(arg: usize, data: *mut u8) -> ! {
        // SAFETY: `data` is the `Pair` of `raw_round_trips`, which outlives every resumption
        // of this context (the context is abandoned, never resumed, once it returns).
        let pair = unsafe { &*data.cast::<Pair>() };
        let mut arg = arg;
        loop {
            // SAFETY: `main` was saved by the switch that resumed us and is resumed once.
            arg = unsafe { switch(pair.side.as_ptr(), pair.main.get(), arg.wrapping_add(1)) };
        }
    }

    let stack = super::stack::Stack::new(super::stack::MIN_STACK_SIZE)?;
    let pair = Pair { main: Cell::new(0), side: Cell::new(0) };
    // SAFETY: a fresh stack, 16-aligned at the top with a guard page below (Stack's contract).
    let sp = unsafe { init_stack(stack.top(), bounce, (&pair as *const Pair).cast_mut().cast()) };
    pair.side.set(sp);
    let start = std::time::Instant::now();
    for i in 0..n as usize {
        // SAFETY: `side` holds the side context's latest saved pointer, resumed once per save.
        let back = unsafe { switch(pair.main.as_ptr(), pair.side.get(), i) };
        assert_eq!(back, i.wrapping_add(1), "the side context returns arg + 1");
    }
    let elapsed = start.elapsed();
    // The side context stays suspended in `bounce`, which owns nothing: dropping its stack
    // (unmapping it) is all the clean-up it needs.
    drop(stack);
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_pass_arguments_both_ways() {
        super::raw_round_trips(1000).unwrap();
    }

    /// Debug builds reset a floating-point environment that a context left changed (module
    /// `fiber::arch::x86_64`, `check_float_env`): switches do not keep one per context, so
    /// without the reset it would carry over to the context resumed next.
    #[test]
    #[cfg(all(target_arch = "x86_64", debug_assertions))]
    fn a_changed_float_environment_is_reset_at_the_next_switch() {
        use std::cell::Cell;
        struct Pair {
            main: Cell<usize>,
            side: Cell<usize>,
            seen: Cell<u32>,
        }
        fn mxcsr() -> u32 {
            let mut v = 0u32;
            // SAFETY: stmxcsr stores 4 bytes to a valid, writable u32.
            unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v, options(nostack)) };
            v
        }
        unsafe extern "C" fn side(_arg: usize, data: *mut u8) -> ! {
            // SAFETY: `data` is the test's Pair, alive while this context runs.
            let pair = unsafe { &*data.cast::<Pair>() };
            pair.seen.set(mxcsr()); // a fresh context starts from the default
            let flush_to_zero = 0x1F80u32 | (1 << 15);
            // SAFETY: ldmxcsr reads 4 bytes from a valid u32; FTZ is a legal mode (and no
            // floating-point code runs before the switch resets it).
            unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &flush_to_zero, options(nostack)) };
            loop {
                // SAFETY: `main` was saved by the switch that resumed us.
                unsafe { super::switch(pair.side.as_ptr(), pair.main.get(), 0) };
            }
        }
        let stack = crate::fiber::stack::Stack::new(crate::fiber::stack::MIN_STACK_SIZE).unwrap();
        let pair = Pair { main: Cell::new(0), side: Cell::new(0), seen: Cell::new(0) };
        // SAFETY: fresh, aligned stack with a guard page.
        let sp = unsafe { super::init_stack(stack.top(), side, (&pair as *const Pair).cast_mut().cast()) };
        // SAFETY: resumes the fresh context once.
        unsafe { super::switch(pair.main.as_ptr(), sp, 0) };
        assert_eq!(pair.seen.get() & 0xFFC0, 0x1F80, "the side context started with the default MXCSR");
        assert_eq!(mxcsr() & 0xFFC0, 0x1F80, "the side context's flush-to-zero was reset, not carried back");
    }
}
