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
//!
//! Contract shared by all back ends: the stack passed to `init_stack` must be writable from
//! `top` down for at least [`INIT_FRAME_BYTES`] and must have a guard page below it; `top` must
//! be 16-byte aligned. A saved stack pointer may be resumed exactly once.

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
#[allow(unused_imports)] // INIT_FRAME_BYTES documents the contract and is used by tests
pub(crate) use x86_64::{init_stack, switch, INIT_FRAME_BYTES};

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "aarch64")]
#[allow(unused_imports)]
pub(crate) use aarch64::{init_stack, switch, INIT_FRAME_BYTES};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("spindle supports x86_64 and aarch64 Linux only");

/// The signature of a fiber's first function: `(arg passed by switch, data given to init_stack)`.
pub(crate) type EntryFn = unsafe extern "C" fn(arg: usize, data: *mut u8) -> !;
