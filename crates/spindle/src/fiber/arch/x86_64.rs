//! x86_64 (System V ABI) context switch.
//!
//! The System V ABI makes `rbx`, `rbp`, `r12`–`r15`, the stack pointer, the control bits of
//! `MXCSR` and the x87 control word callee-saved. Everything else is caller-saved, so the
//! compiler has already spilled whatever it needs before calling [`switch`]: saving those
//! eight items is all a switch has to do.
//!
//! Layout of a suspended context, as `switch` leaves it (addresses grow upwards):
//!
//! ```text
//!            +------------------------+
//!  sp + 56   | return address         |  where `switch` returns when resumed
//!  sp + 48   | rbp                    |
//!  sp + 40   | rbx                    |
//!  sp + 32   | r12                    |
//!  sp + 24   | r13                    |
//!  sp + 16   | r14                    |
//!  sp +  8   | r15                    |
//!  sp +  4   | x87 control word (u16) |
//!  sp +  0   | MXCSR (u32)            |  <- saved stack pointer (16-byte aligned)
//!            +------------------------+
//! ```
//!
//! A fresh stack prepared by [`init_stack`] has the same shape, with the return address
//! pointing at [`trampoline`], `r12` holding the entry function and `r13` its data pointer:
//!
//! ```text
//!  top -  8  | 0                      |  padding: keeps the entry call 16-byte aligned
//!  top - 16  | 0                      |  fake return address: ends backtraces
//!  top - 24  | trampoline             |  popped by `ret` at the end of `switch`
//!  top - 32  | rbp = 0                |
//!  top - 40  | rbx = 0                |
//!  top - 48  | r12 = entry            |
//!  top - 56  | r13 = data             |
//!  top - 64  | r14 = 0                |
//!  top - 72  | r15 = 0                |
//!  top - 80  | MXCSR 0x1F80, FCW 0x037F | <- initial saved stack pointer
//! ```

use core::arch::naked_asm;

use super::EntryFn;

/// Bytes that [`init_stack`] writes below the top of a fresh stack.
pub(crate) const INIT_FRAME_BYTES: usize = 80;

/// The ABI's initial MXCSR: all exceptions masked, round to nearest.
const DEFAULT_MXCSR: u64 = 0x1F80;
/// The ABI's initial x87 control word: all exceptions masked, 64-bit precision, nearest.
const DEFAULT_FCW: u64 = 0x037F;

/// Saves the running context, stores its stack pointer in `*save`, and resumes the context
/// whose saved stack pointer is `to`, which sees `arg` as the return value of its own
/// `switch` call (or, for a fresh stack, as the first argument of its entry function).
///
/// # Safety
///
/// `save` must be valid for a write. `to` must be a stack pointer saved by `switch` or
/// returned by [`init_stack`], not resumed since, on a stack that is still mapped; it must not
/// be the running context's own stack.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn switch(save: *mut usize, to: usize, arg: usize) -> usize {
    // rdi = save, rsi = to, rdx = arg. On entry [rsp] is our return address.
    naked_asm!(
        "push rbp",         // callee-saved: frame pointer
        "push rbx",         // callee-saved
        "push r12",         // callee-saved
        "push r13",         // callee-saved
        "push r14",         // callee-saved
        "push r15",         // callee-saved
        "sub rsp, 8",       // room for the two control words; rsp is now 16-aligned
        "stmxcsr [rsp]",    // save the SSE control/status word (callee-saved bits)
        "fnstcw [rsp + 4]", // save the x87 control word (callee-saved)
        "mov [rdi], rsp",   // publish our stack pointer: we are now suspended
        "mov rsp, rsi",     // adopt the target's stack
        "ldmxcsr [rsp]",    // restore the target's SSE control word
        "fldcw [rsp + 4]",  // restore the target's x87 control word
        "add rsp, 8",       // drop the control-word slot
        "pop r15",          // restore the target's callee-saved registers...
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",      // ...down to its frame pointer
        "mov rax, rdx", // hand `arg` over as the return value of its `switch`
        "ret",          // jump to the target's return address
    )
}

/// First code run on a fresh stack: `switch` "returns" here with `rax = arg`, `r12 = entry`
/// and `r13 = data` (popped from the frame written by [`init_stack`]), and
/// `rsp ≡ 0 (mod 16)`.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() -> ! {
    naked_asm!(
        ".cfi_startproc",     // unwind info for this frame...
        ".cfi_undefined rip", // ...saying it is the outermost one: backtraces stop here
        "mov rdi, rax",       // first argument: the value passed to `switch`
        "mov rsi, r13",       // second argument: the data pointer
        "call r12",           // entry(arg, data); pushes a return address: rsp ≡ 8 (mod 16) as the ABI wants
        "ud2",                // entry never returns; trap if it does
        ".cfi_endproc",
    )
}

/// Writes the initial frame of a fresh stack whose highest usable address is `top` and returns
/// the stack pointer to pass to [`switch`]. The first switch to it calls `entry(arg, data)`.
///
/// # Safety
///
/// `top` must be 16-byte aligned, and `[top - INIT_FRAME_BYTES, top)` must be writable memory
/// of a stack that nothing else uses.
pub(crate) unsafe fn init_stack(top: *mut u8, entry: EntryFn, data: *mut u8) -> usize {
    debug_assert_eq!(top as usize % 16, 0, "stack top must be 16-byte aligned");
    let words = top.cast::<u64>();
    let frame: [(usize, u64); 10] = [
        (1, 0),                                    // padding
        (2, 0),                                    // fake return address
        (3, trampoline as *const () as u64),       // return address of the first switch
        (4, 0),                                    // rbp
        (5, 0),                                    // rbx
        (6, entry as *const () as u64),            // r12
        (7, data as u64),                          // r13
        (8, 0),                                    // r14
        (9, 0),                                    // r15
        (10, DEFAULT_MXCSR | (DEFAULT_FCW << 32)), // MXCSR, then the x87 control word
    ];
    for (slot, value) in frame {
        let at = words.wrapping_sub(slot);
        // SAFETY: slot ≤ 10 words = INIT_FRAME_BYTES below `top`, which the caller guarantees
        // to be writable stack memory; `top` is 16-aligned so every slot is 8-aligned.
        unsafe { at.write(value) };
    }
    top as usize - INIT_FRAME_BYTES
}
