//! Stack overflow detection for fibers.
//!
//! Every fiber stack has a guard page below it. Rust emits stack probes, so a frame that
//! outgrows the stack touches the guard page before anything below it, and the kernel raises
//! SIGSEGV (or SIGBUS) with the faulting address. Our handler runs on an alternate signal
//! stack (the fiber stack is exhausted), checks whether the address lies in the guard page of
//! the fiber running on this thread, and if so writes which fiber overflowed and aborts, as
//! Rust does for a thread's overflow. Any other fault goes to the handler that was installed
//! before ours (Rust's own, or the default action), so crashes elsewhere look as they did.
//!
//! Invariants:
//! - The handler only reads: the thread-local pointer to the running fiber's header (set by
//!   the worker before every switch into a fiber, cleared when the worker runs its own
//!   context) and that header's immutable fields plus `guard` (written before the first
//!   switch into the fiber). It allocates nothing and calls only async-signal-safe functions
//!   (`write`, `abort`, `sigaction`).
//! - Each worker thread has an alternate signal stack ([`AltStack`]) for as long as it runs
//!   fibers.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::Once;

use super::control::Header;
use super::stack::page_size;

std::thread_local! {
    /// The header of the fiber running on this thread, or null.
    static RUNNING: Cell<*const Header> = const { Cell::new(ptr::null()) };
}

/// Records which fiber runs on this thread (null: none), for the signal handler.
#[inline]
pub(crate) fn set_running(header: *const Header) {
    RUNNING.with(|r| r.set(header));
}

struct PreviousHandlers {
    segv: UnsafeSigaction,
    bus: UnsafeSigaction,
}

struct UnsafeSigaction(std::cell::UnsafeCell<MaybeUninit<libc::sigaction>>);

// SAFETY: written once inside `INSTALL.call_once` before our handler is installed, read-only
// afterwards.
unsafe impl Sync for UnsafeSigaction {}

static PREVIOUS: PreviousHandlers = PreviousHandlers {
    segv: UnsafeSigaction(std::cell::UnsafeCell::new(MaybeUninit::zeroed())),
    bus: UnsafeSigaction(std::cell::UnsafeCell::new(MaybeUninit::zeroed())),
};
static INSTALL: Once = Once::new();

/// Installs the SIGSEGV/SIGBUS handler once per process.
pub(crate) fn install_handler() {
    INSTALL.call_once(|| {
        for (signal, slot) in [(libc::SIGSEGV, &PREVIOUS.segv), (libc::SIGBUS, &PREVIOUS.bus)] {
            // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags).
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = handler as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            // SAFETY: `action` is initialised and `slot` is writable: we are inside call_once,
            // before our handler (the only reader) can run.
            let rc = unsafe { libc::sigaction(signal, &action, (*slot.0.get()).as_mut_ptr()) };
            assert_eq!(rc, 0, "sigaction failed: {}", std::io::Error::last_os_error());
        }
    });
}

extern "C" fn handler(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let header = RUNNING.with(|r| r.get());
    if !header.is_null() {
        // SAFETY: RUNNING points to the header of the fiber running on this thread, which is
        // alive while it runs (module invariants).
        let header = unsafe { &*header };
        let (lo, hi) = header.guard.get();
        if lo <= addr && addr < hi {
            report_overflow(header);
        }
    }
    // Not ours: hand the signal to the previous handler.
    let slot = if signal == libc::SIGBUS { &PREVIOUS.bus } else { &PREVIOUS.segv };
    // SAFETY: written before our handler was installed (see UnsafeSigaction).
    let previous = unsafe { (*slot.0.get()).assume_init_ref() };
    match previous.sa_sigaction {
        libc::SIG_DFL | libc::SIG_IGN => {
            // Restore the default action and return: the faulting instruction runs again and
            // the kernel then kills the process with the original signal.
            // SAFETY: a zeroed sigaction with SIG_DFL is valid.
            let mut default: libc::sigaction = unsafe { std::mem::zeroed() };
            default.sa_sigaction = libc::SIG_DFL;
            // SAFETY: valid arguments; sigaction is async-signal-safe.
            unsafe { libc::sigaction(signal, &default, ptr::null_mut()) };
        }
        f if previous.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the previous handler was registered with SA_SIGINFO, so it has this
            // signature; we forward exactly what the kernel gave us.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(f) };
            f(signal, info, context);
        }
        f => {
            // SAFETY: a handler registered without SA_SIGINFO has the one-argument signature.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(f) };
            f(signal);
        }
    }
}

/// Writes the overflow message to stderr and aborts. Async-signal-safe: no allocation.
fn report_overflow(header: &Header) -> ! {
    let mut buf = Buf::new();
    buf.push(b"\nfiber '");
    buf.push(header.display_name().as_bytes());
    buf.push(b"' (id ");
    buf.push_num(header.id as usize);
    buf.push(b") has overflowed its stack (stack size ");
    buf.push_num(header.stack_size / 1024);
    buf.push(b" KiB, including a ");
    buf.push_num(page_size() / 1024);
    buf.push(b" KiB guard page)\nfatal runtime error: fiber stack overflow, aborting\n");
    // SAFETY: write(2) on fd 2 with a valid buffer; async-signal-safe.
    unsafe { libc::write(2, buf.bytes.as_ptr().cast(), buf.len) };
    // SAFETY: abort is async-signal-safe and never returns.
    unsafe { libc::abort() }
}

/// A fixed buffer for building the message without allocating.
struct Buf {
    bytes: [u8; 512],
    len: usize,
}

impl Buf {
    fn new() -> Buf {
        Buf { bytes: [0; 512], len: 0 }
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn push_num(&mut self, mut n: usize) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// An alternate signal stack for the current thread, installed if the thread has none.
/// Dropping it (on the same thread) uninstalls and frees it.
pub(crate) struct AltStack {
    map: *mut libc::c_void,
    len: usize,
}

impl AltStack {
    /// Makes sure this thread can run signal handlers when its stack is exhausted.
    pub(crate) fn ensure() -> Option<AltStack> {
        // SAFETY: querying with a null new stack only writes `old`.
        let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        unsafe { libc::sigaltstack(ptr::null(), &mut old) };
        if old.ss_flags & libc::SS_DISABLE == 0 {
            return None; // the thread has one already (Rust's runtime gives threads one)
        }
        let page = page_size();
        // SAFETY: getauxval has no preconditions.
        let min = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
        let len = (libc::SIGSTKSZ.max(min) + 64 * 1024).div_ceil(page) * page;
        // SAFETY: a fresh anonymous mapping; checked below.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let stack = libc::stack_t { ss_sp: map, ss_flags: 0, ss_size: len };
        // SAFETY: `stack` describes memory we own for as long as the AltStack lives.
        unsafe { libc::sigaltstack(&stack, ptr::null_mut()) };
        Some(AltStack { map, len })
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let disable = libc::stack_t { ss_sp: ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
        // SAFETY: uninstalls the alternate stack of this thread (the one we installed).
        unsafe { libc::sigaltstack(&disable, ptr::null_mut()) };
        // SAFETY: the mapping is ours and no longer the signal stack.
        unsafe { libc::munmap(self.map, self.len) };
    }
}
