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
//! - It does not save or restore MXCSR or the x87 control word. The ABI makes their control
//!   bits callee-saved, but Rust requires them to hold their defaults wherever Rust code runs
//!   (changing the rounding mode, the exception masks or the denormal modes is undefined
//!   behaviour: `core::arch::x86_64::_mm_setcsr`), and a switch is only ever reached from Rust
//!   code, so both contexts of every switch already hold the same, default, words. Saving
//!   them anyway (`stmxcsr`, and a reload when they differed) was the largest single cost of
//!   a switch (`docs/perf/context-switch.md`, `docs/decisions/001-control-words-not-saved.md`).
//!   Go's scheduler does not save them either. Debug builds check the rule at every switch
//!   ([`check_float_env`]): words left changed are reset to the defaults and reported.
//!
//! Layout of a suspended context, as `switch` leaves it (addresses grow upwards):
//!
//! ```text
//!            +------------------------+
//!  sp + 16   | rbp                    |
//!  sp +  8   | rbx                    |
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
//!  top -  8  | link (or 0)            |  keeps the entry's stack 16-aligned; see below
//!  top - 16  | data                   |
//!  top - 24  | entry                  |
//!  top - 32  | trampoline             |  <- initial saved stack pointer
//! ```
//!
//! # Stacks linked for debuggers
//!
//! The top word of a fiber's stack holds the *link* ([`link_stack`]): the address of the slot
//! where the context that runs the fiber's scheduler (the worker's loop, in
//! `resume_from_scheduler`) saves its stack pointer when it switches away. The trampoline's
//! unwind information (DWARF CFI) computes its caller's frame from it: the canonical frame
//! address is `*(*link) + 24`, the return address is the resume address saved there, and
//! `rbx`/`rbp` are the two words above it (the suspended layout drawn above). So a backtrace
//! taken in a fiber (gdb's `bt`, `std::backtrace`, perf with DWARF unwinding) goes on from the
//! fiber's entry into the worker's loop and the thread's own frames, as corosensei links a
//! coroutine to its resumer. The scheduler context is suspended whenever a fiber runs (fibers
//! switch to one another directly, but the loop stays suspended where it last resumed one), so
//! the slot always holds a live stack pointer; a stack without a link (0: the raw round trips
//! of the benchmarks) ends the backtrace at the trampoline, as before. The link is written once
//! per start: a fiber never changes worker.

use core::arch::{asm, naked_asm};

use super::EntryFn;

/// Bytes that [`init_stack`] writes below the top of a fresh stack.
pub(crate) const INIT_FRAME_BYTES: usize = 32;

/// The ABI's initial MXCSR control bits (checked in debug builds): all exceptions masked,
/// round to nearest, no flush-to-zero or denormals-are-zero (bits 0-5 are status flags, not
/// compared).
#[cfg(debug_assertions)]
const DEFAULT_MXCSR: u32 = 0x1F80;
/// The ABI's initial x87 control word: all exceptions masked, 64-bit precision, nearest.
#[cfg(debug_assertions)]
const DEFAULT_FCW: u16 = 0x037F;

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
    #[cfg(debug_assertions)]
    check_float_env();
    let ret: usize;
    // SAFETY: the caller guarantees `save` and `to` (see above). The block restores rsp, rbx
    // and rbp before it falls through at label 2, declares every other register it or the
    // other context may change as clobbered, and leaves the red zone alone (no `nostack`:
    // the compiler keeps nothing live below rsp across the block).
    unsafe {
        asm!(
            "push rbp",                  // rbp and rbx are reserved by LLVM: save them by hand
            "push rbx",
            "lea rax, [rip + 2f]",       // our resume address: label 2 below
            "push rax",                  // on top of the frame, where the resumer finds it
            "mov [rdi], rsp",            // publish our stack pointer: we are now suspended
            "mov rsp, rsi",              // adopt the target's stack
            "pop rax",                   // its resume address (label 2 of its own switch, or the trampoline)
            "jmp rax",                   // resume it; rdx carries `arg`
            "2:",                        // we are resumed here by another context's `jmp rax`
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

/// Debug builds, at every switch: if MXCSR's control bits or the x87 control word are not the
/// defaults (a fiber changed them and did not restore them before it suspended, which Rust
/// forbids anyway), resets them to the defaults and reports it. Without this the change would
/// carry over to whatever runs next on the worker. Not a panic: the switch is reached with the
/// scheduler's state half-updated (the fiber already queued or parked), where unwinding would
/// corrupt it.
#[cfg(debug_assertions)]
#[inline(never)]
pub(crate) fn check_float_env() {
    let mut mxcsr = 0u32;
    let mut fcw = 0u16;
    // SAFETY: `stmxcsr` and `fnstcw` store 4 and 2 bytes into the two locals, which are valid
    // and writable; nothing else is touched.
    unsafe {
        asm!(
            "stmxcsr [{m}]",  // MXCSR into `mxcsr`
            "fnstcw [{f}]",   // the x87 control word into `fcw`
            m = in(reg) &mut mxcsr,
            f = in(reg) &mut fcw,
            options(nostack, preserves_flags),
        )
    };
    if mxcsr & 0xFFC0 == DEFAULT_MXCSR && fcw == DEFAULT_FCW {
        return;
    }
    let (default_mxcsr, default_fcw) = (DEFAULT_MXCSR, DEFAULT_FCW);
    // SAFETY: `ldmxcsr` and `fldcw` read 4 and 2 bytes from the two locals, the ABI's initial
    // words (legal values, all exceptions masked).
    unsafe {
        asm!(
            "ldmxcsr [{m}]",  // the default MXCSR (status flags cleared too)
            "fldcw [{f}]",    // the default x87 control word
            m = in(reg) &default_mxcsr,
            f = in(reg) &default_fcw,
            options(nostack, preserves_flags),
        )
    };
    crate::report::error(format_args!(
        "spindle: a context switch found MXCSR {mxcsr:#06x} and x87 control word {fcw:#06x}, not the \
         defaults ({DEFAULT_MXCSR:#06x}, {DEFAULT_FCW:#06x}): Rust code must run with the default \
         floating-point environment (see core::arch::x86_64::_mm_setcsr), so a fiber has to restore \
         it before it yields, parks or ends; spindle does not keep one per fiber. Reset to the defaults."
    ));
}

/// First code run on a fresh stack: the `jmp rax` of a [`switch`] lands here with
/// `rsp = top - 24` (the trampoline's own address popped), `rdx = arg`, and the entry and data
/// above `rsp` as [`init_stack`] wrote them.
///
/// It enters the entry function with a `jmp`, a return address pushed by hand, not with a
/// `call`: the entry never returns, so a `call` would leave an entry on the
/// CPU's return stack buffer that nothing pops, and the context the fiber finally switches
/// to would pop it instead of its own with its next `ret` (a misprediction, and every later
/// `ret` of that context mispredicted too, one entry off). Without it, a fiber whose last
/// switch happens in the entry function's own frame (`fiber_entry` inlines its end) leaves
/// the return stack buffer as the context it resumes left it.
///
/// Unwind information: until the entry is entered, the frame is the outermost one (a
/// backtrace stops); from the emulated call on, its caller is the context the link names
/// (module doc, "Stacks linked for debuggers"). Its rules are written for the call site as
/// unwinders see it from the entry's frame: `rsp` as before the return address was pushed
/// (`top - 16`), so the link is at `rsp + 8`.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() -> ! {
    naked_asm!(
        ".cfi_startproc",      // unwind info for this frame...
        ".cfi_undefined rip",  // ...outermost while it sets the entry up: backtraces stop here
        "pop rax",             // the entry function
        "pop rsi",             // second argument: the data pointer
        "sub rsp, 8",          // rsp = top - 16: 16-aligned, as the ABI wants before a call
        "lea rcx, [rip + 3f]", // the return address a `call` would push, inside this frame
        "push rcx",            // so unwinders find this frame
        // From here, as seen from the entry's frame (rsp = top - 16): the caller's CFA is
        // *(*(rsp + 8)) + 24, i.e. DW_CFA_def_cfa_expression, 6 bytes: DW_OP_breg7 (rsp) 8,
        // DW_OP_deref (the link: the slot's address), DW_OP_deref (the saved stack pointer),
        // DW_OP_plus_uconst 24 (past the resume address, rbx and rbp).
        ".cfi_escape 0x0f, 0x06, 0x77, 0x08, 0x06, 0x06, 0x23, 0x18",
        ".cfi_offset rip, -24", // the resume address, at the saved stack pointer
        ".cfi_offset rbx, -16", // then rbx
        ".cfi_offset rbp, -8",  // then rbp
        "mov rdi, rdx",         // first argument: the value passed to `switch`
        "jmp rax",              // entry(arg, data), on this stack, as if called
        "3:",
        "ud2", // entry never returns; trap if it does
        ".cfi_endproc",
    )
}

/// Links a fresh stack prepared by [`init_stack`] below `top` to the context that saves its
/// stack pointer in `*slot` (module doc, "Stacks linked for debuggers"): unwinders continue
/// from the fiber's entry into that context's frames.
///
/// # Safety
///
/// `top` is the top given to [`init_stack`], before the stack first runs. `*slot` must hold
/// the saved stack pointer of a suspended context (saved by [`switch`]) whenever code runs on
/// the stack, for as long as it is in use: unwinders read it.
pub(crate) unsafe fn link_stack(top: *mut u8, slot: *const usize) {
    // SAFETY: the top word is the padding slot `init_stack` wrote (the caller's contract),
    // 8-aligned since `top` is 16-aligned.
    unsafe { top.cast::<u64>().wrapping_sub(1).write(slot as u64) };
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
        (1, 0),                              // padding: the entry's stack stays 16-aligned
        (2, data as u64),                    // popped into rsi by the trampoline
        (3, entry as *const () as u64),      // popped into rax by the trampoline
        (4, trampoline as *const () as u64), // the resume address of a fresh stack
    ];
    for (slot, value) in frame {
        let at = words.wrapping_sub(slot);
        // SAFETY: slot ≤ 4 words = INIT_FRAME_BYTES below `top`, which the caller guarantees
        // to be writable stack memory; `top` is 16-aligned so every slot is 8-aligned.
        unsafe { at.write(value) };
    }
    top as usize - INIT_FRAME_BYTES
}
