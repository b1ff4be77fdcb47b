//! x86_64 (System V ABI) context switch.
//!
//! The System V ABI makes `rbx`, `rbp`, `r12`–`r15`, the stack pointer, the control bits of
//! `MXCSR` and the x87 control word callee-saved. Everything else is caller-saved.
//!
//! # Design
//!
//! [`switch`] is an *inlined* `asm!` block, not a function:
//!
//! - It declares `r12`–`r15` and every caller-saved register as clobbered (`clobber_abi`), so
//!   the compiler saves around the switch only the registers that hold live values at that
//!   point, often none. `rbx` and `rbp` are reserved by LLVM and cannot be declared clobbered,
//!   so the block pushes and pops them itself.
//! - It never uses `call` or `ret` to change context. A suspended context is resumed with an
//!   indirect `jmp` to its saved resume address. `ret` would consult the CPU's return stack
//!   buffer, whose top belongs to the context that is switching away, and so mispredict on
//!   nearly every switch; an indirect `jmp` is predicted by the branch target buffer, which
//!   learns the repeating patterns of a scheduler (two fibers ping-ponging, say).
//! - Each context restores its own MXCSR and x87 control word when it is resumed, so a fiber
//!   that changes the rounding mode or enables flush-to-zero does not leak it to others.
//!   Loading them (`ldmxcsr`, `fldcw`) is the slowest part of a switch, and nearly every
//!   program runs all its fibers with the same control words, so the switching context hands
//!   a key of its own (the x87 control word and the MXCSR control bits, status flags dropped)
//!   to the resumed one in `ecx`, and the resumed context loads its saved words only when its
//!   own key differs. The key is rebuilt from the two stores with loads of the same widths,
//!   so that store-to-load forwarding works (one 8-byte load spanning the 4-byte and 2-byte
//!   stores stalled every switch by about 10 ns here). Saving (`stmxcsr`) is what remains: it
//!   costs about 4 ns per switch on this machine, the price of the ABI's guarantee.
//!
//! Layout of a suspended context, as `switch` leaves it (addresses grow upwards):
//!
//! ```text
//!            +------------------------+
//!  sp + 32   | rbp                    |
//!  sp + 24   | rbx                    |
//!  sp + 16   | key: FCW << 16 | MXCSR control bits (u32), compared on resumption
//!  sp +  8   | MXCSR (u32), FCW (u16) |  as stored by stmxcsr / fnstcw
//!  sp +  0   | resume address         |  <- saved stack pointer (label 2 of `switch`)
//!            +------------------------+
//! ```
//!
//! (Whatever the compiler chose to spill around the `asm!` block sits above, in the
//! enclosing function's frame.)
//!
//! A fresh stack prepared by [`init_stack`] looks like a suspended context whose resume
//! address is [`trampoline`]:
//!
//! ```text
//!  top -  8  | MXCSR 0x1F80, FCW 0x037F |  the ABI's initial control words
//!  top - 16  | data                   |
//!  top - 24  | entry                  |
//!  top - 32  | trampoline             |  <- initial saved stack pointer
//! ```

use core::arch::{asm, naked_asm};

use super::EntryFn;

/// Bytes that [`init_stack`] writes below the top of a fresh stack.
pub(crate) const INIT_FRAME_BYTES: usize = 32;

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
#[inline(always)]
pub(crate) unsafe fn switch(save: *mut usize, to: usize, arg: usize) -> usize {
    let ret: usize;
    // SAFETY: the caller guarantees `save` and `to` (see above). The block restores rsp, rbx
    // and rbp before it falls through at label 2, declares every other register it or the
    // other context may change as clobbered, and leaves the red zone alone (no `nostack`:
    // the compiler keeps nothing live below rsp across the block).
    unsafe {
        asm!(
            "push rbp",                  // rbp and rbx are reserved by LLVM: save them by hand
            "push rbx",
            "sub rsp, 16",               // the control words at rsp, our comparison key at rsp + 8
            "stmxcsr [rsp]",             // our SSE control/status word (its control bits are callee-saved)
            "fnstcw [rsp + 4]",          // our x87 control word (callee-saved)
            "mov ecx, [rsp]",            // MXCSR back, same width as its store (so it forwards)
            "and ecx, 0xFFC0",           // control bits only: status flags 0-5 are caller-saved
            "movzx eax, word ptr [rsp + 4]", // the x87 control word, same width as its store
            "shl eax, 16",
            "or ecx, eax",               // key = FCW << 16 | MXCSR control bits
            "mov [rsp + 8], ecx",        // kept for the comparison when we are resumed
            "lea rax, [rip + 2f]",       // our resume address: label 2 below
            "push rax",                  // on top of the frame, where the resumer finds it
            "mov [rdi], rsp",            // publish our stack pointer: we are now suspended
            "mov rsp, rsi",              // adopt the target's stack
            "pop rax",                   // its resume address (label 2 of its own switch, or the trampoline)
            "jmp rax",                   // resume it; rdx carries `arg`, ecx our key
            "2:",                        // we are resumed here by another context's `jmp rax`
            "cmp ecx, [rsp + 8]",        // the resumer's control words equal ours?
            "je 3f",                     // then the registers already hold ours: skip the slow loads
            "ldmxcsr [rsp]",             // our own SSE control word back
            "fldcw [rsp + 4]",           // our own x87 control word back
            "3:",
            "add rsp, 16",               // drop the control-word slots
            "pop rbx",                   // our rbx and rbp back: the frame is gone
            "pop rbp",
            in("rdi") save,
            in("rsi") to,
            inlateout("rdx") arg => ret,
            out("rax") _,
            out("rcx") _,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        );
    }
    ret
}

/// The comparison key (see [`switch`]) of the ABI's initial control words, which a fresh
/// stack starts with.
const DEFAULT_KEY: u32 = ((DEFAULT_FCW as u32) << 16) | (DEFAULT_MXCSR as u32 & 0xFFC0);

/// First code run on a fresh stack: the `jmp rax` of a [`switch`] lands here with
/// `rsp = top - 24` (the trampoline's own address popped), `rdx = arg`, `ecx` the resumer's
/// key, and the entry, data and control words above `rsp` as [`init_stack`] wrote them.
///
/// Like `switch`, it loads the initial control words only when the resumer's key differs
/// from theirs (nearly never: `ldmxcsr` and `fldcw` on every fiber start cost more than the
/// rest of it). And it enters the entry function with a `jmp`, a return address pushed by
/// hand, not with a `call`: the entry never returns, so a `call` would leave an entry on the
/// CPU's return stack buffer that nothing pops, and the context the fiber finally switches
/// to would pop it instead of its own with its next `ret` (a misprediction, and every later
/// `ret` of that context mispredicted too, one entry off). Without it, a fiber whose last
/// switch happens in the entry function's own frame (`fiber_entry` inlines its end) leaves
/// the return stack buffer as the context it resumes left it.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() -> ! {
    naked_asm!(
        ".cfi_startproc",     // unwind info for this frame...
        ".cfi_undefined rip", // ...saying it is the outermost one: backtraces stop here
        "pop rax",            // the entry function
        "pop rsi",            // second argument: the data pointer
        "cmp ecx, {key}",     // the resumer's control words are the initial ones?
        "je 2f",              // then the registers hold them already
        "ldmxcsr [rsp]",      // the ABI's initial SSE control word
        "fldcw [rsp + 4]",    // the ABI's initial x87 control word
        "2:",
        "sub rsp, 8",         // rsp = top - 16: 16-aligned, as the ABI wants before a call
        "lea rcx, [rip + 3f]", // the return address a `call` would push, inside this frame
        "push rcx",           // so unwinders find this frame (and stop at it)
        "mov rdi, rdx",       // first argument: the value passed to `switch`
        "jmp rax",            // entry(arg, data), on this stack, as if called
        "3:",
        "ud2",                // entry never returns; trap if it does
        ".cfi_endproc",
        key = const DEFAULT_KEY,
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
    let frame: [(usize, u64); 4] = [
        (1, DEFAULT_MXCSR | (DEFAULT_FCW << 32)), // MXCSR, then the x87 control word
        (2, data as u64),                         // popped into rsi by the trampoline
        (3, entry as *const () as u64),           // popped into rax by the trampoline
        (4, trampoline as *const () as u64),      // the resume address of a fresh stack
    ];
    for (slot, value) in frame {
        let at = words.wrapping_sub(slot);
        // SAFETY: slot ≤ 4 words = INIT_FRAME_BYTES below `top`, which the caller guarantees
        // to be writable stack memory; `top` is 16-aligned so every slot is 8-aligned.
        unsafe { at.write(value) };
    }
    top as usize - INIT_FRAME_BYTES
}
