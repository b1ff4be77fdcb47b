//! aarch64 (AAPCS64) context switch.
//!
//! AAPCS64 makes `x19`–`x28`, the frame pointer `x29`, the link register `x30` (we return
//! through it), `sp`, the low halves `d8`–`d15` of `v8`–`v15`, and the control bits of `FPCR`
//! callee-saved. The switch saves exactly those, in a 176-byte frame (16-byte aligned):
//!
//! ```text
//!  sp + 160  | FPCR        |
//!  sp + 144  | d14, d15    |
//!  sp + 128  | d12, d13    |
//!  sp + 112  | d10, d11    |
//!  sp +  96  | d8,  d9     |
//!  sp +  80  | x29, x30    |  frame pointer, link register (where `switch` returns)
//!  sp +  64  | x27, x28    |
//!  sp +  48  | x25, x26    |
//!  sp +  32  | x23, x24    |
//!  sp +  16  | x21, x22    |
//!  sp +   0  | x19, x20    |  <- saved stack pointer
//! ```
//!
//! A fresh stack holds the same frame with `x30 = trampoline`, `x19 = entry`, `x20 = data`,
//! everything else zero (FPCR 0 is the ABI's initial state: round to nearest, no traps).

use core::arch::naked_asm;

use super::EntryFn;

/// Bytes that [`init_stack`] writes below the top of a fresh stack.
pub(crate) const INIT_FRAME_BYTES: usize = 176;

/// See the module documentation; same contract as the x86_64 back end.
///
/// # Safety
///
/// `save` must be valid for a write. `to` must be a stack pointer saved by `switch` or
/// returned by [`init_stack`], not resumed since, on a stack that is still mapped.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn switch(save: *mut usize, to: usize, arg: usize) -> usize {
    // x0 = save, x1 = to, x2 = arg, x30 = our return address.
    naked_asm!(
        "sub sp, sp, #176",       // room for the frame drawn above
        "stp x19, x20, [sp, #0]", // callee-saved general registers...
        "stp x21, x22, [sp, #16]",
        "stp x23, x24, [sp, #32]",
        "stp x25, x26, [sp, #48]",
        "stp x27, x28, [sp, #64]",
        "stp x29, x30, [sp, #80]", // ...frame pointer and return address
        "stp d8, d9, [sp, #96]",   // callee-saved halves of the vector registers
        "stp d10, d11, [sp, #112]",
        "stp d12, d13, [sp, #128]",
        "stp d14, d15, [sp, #144]",
        "mrs x9, fpcr",             // read the floating-point control register
        "str x9, [sp, #160]",       // and save it
        "mov x10, sp",              // sp cannot be stored directly
        "str x10, [x0]",            // publish our stack pointer: we are now suspended
        "mov sp, x1",               // adopt the target's stack
        "ldr x9, [sp, #160]",       // the target's FPCR...
        "msr fpcr, x9",             // ...restored
        "ldp d14, d15, [sp, #144]", // restore the target's vector halves...
        "ldp d12, d13, [sp, #128]",
        "ldp d10, d11, [sp, #112]",
        "ldp d8, d9, [sp, #96]",
        "ldp x29, x30, [sp, #80]", // ...its frame pointer and return address...
        "ldp x27, x28, [sp, #64]", // ...and its general registers
        "ldp x25, x26, [sp, #48]",
        "ldp x23, x24, [sp, #32]",
        "ldp x21, x22, [sp, #16]",
        "ldp x19, x20, [sp, #0]",
        "add sp, sp, #176", // drop the frame
        "mov x0, x2",       // hand `arg` over as the return value
        "ret",              // branch to x30
    )
}

/// First code run on a fresh stack: `switch` returns here with `x0 = arg`, `x19 = entry`,
/// `x20 = data`.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() -> ! {
    naked_asm!(
        ".cfi_startproc",     // unwind info for this frame...
        ".cfi_undefined x30", // ...saying it is the outermost one: backtraces stop here
        "mov x1, x20",        // second argument: the data pointer (x0 already holds arg)
        "blr x19",            // entry(arg, data), never returns
        "brk #1",             // trap if it does
        ".cfi_endproc",
    )
}

/// Writes the initial frame below `top` and returns the stack pointer to switch to.
///
/// # Safety
///
/// `top` must be 16-byte aligned, and `[top - INIT_FRAME_BYTES, top)` must be writable memory
/// of a stack that nothing else uses.
pub(crate) unsafe fn init_stack(top: *mut u8, entry: EntryFn, data: *mut u8) -> usize {
    debug_assert_eq!(top as usize % 16, 0, "stack top must be 16-byte aligned");
    let sp = top.wrapping_sub(INIT_FRAME_BYTES).cast::<u64>();
    for slot in 0..INIT_FRAME_BYTES / 8 {
        let value = match slot {
            0 => entry as *const () as u64,       // x19
            1 => data as u64,                     // x20
            11 => trampoline as *const () as u64, // x30
            _ => 0,
        };
        let at = sp.wrapping_add(slot);
        // SAFETY: `at` lies in [top - INIT_FRAME_BYTES, top), writable per the caller's
        // contract, and is 8-aligned because `top` is 16-aligned.
        unsafe { at.write(value) };
    }
    sp as usize
}

/// Links a fresh stack to the context that saves its stack pointer in `*slot`, for unwinders
/// (module `fiber::arch::x86_64`, "Stacks linked for debuggers"). Not done on aarch64: a
/// backtrace stops at the fiber's entry.
///
/// # Safety
///
/// As on x86_64 (nothing is written here).
pub(crate) unsafe fn link_stack(_top: *mut u8, _slot: *const usize) {}
