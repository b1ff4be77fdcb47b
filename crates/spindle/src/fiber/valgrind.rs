//! Valgrind client requests for fiber stacks.
//!
//! Valgrind tracks which memory is "the stack" to tell stack switches from huge frame
//! allocations. Registering each fiber stack (`VALGRIND_STACK_REGISTER`) lets memcheck follow
//! our switches without false errors. A client request is a magic instruction sequence that
//! does nothing on real hardware (the rotations add up to 128 bits, a no-op, and
//! `xchg rbx, rbx` changes nothing), so this costs a few cycles per stack mapping and nothing
//! per switch. Under valgrind the request's result replaces the default value in `rdx`.

/// `VG_USERREQ__STACK_REGISTER` from valgrind.h.
const STACK_REGISTER: usize = 0x1501;
/// `VG_USERREQ__STACK_DEREGISTER` from valgrind.h.
const STACK_DEREGISTER: usize = 0x1502;

/// Issues one client request; returns `default` when not running under valgrind.
#[cfg(target_arch = "x86_64")]
fn client_request(default: usize, request: usize, a1: usize, a2: usize) -> usize {
    let args: [usize; 6] = [request, a1, a2, 0, 0, 0];
    let result;
    // SAFETY: the sequence only rotates rdi (declared clobbered) by 128 bits in total and
    // exchanges rbx with itself; valgrind reads `args` through rax and writes rdx.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",           // magic preamble, part 1
            "rol rdi, 13",          // part 2
            "rol rdi, 61",          // part 3
            "rol rdi, 51",          // part 4: rdi is back to its value
            "xchg rbx, rbx",        // the request marker
            inout("rdx") default => result,
            in("rax") args.as_ptr(),
            inout("rdi") 0usize => _,
            options(nostack, preserves_flags),
        );
    }
    result
}

/// Issues one client request; returns `default` when not running under valgrind.
#[cfg(target_arch = "aarch64")]
fn client_request(default: usize, request: usize, a1: usize, a2: usize) -> usize {
    let args: [usize; 6] = [request, a1, a2, 0, 0, 0];
    let result;
    // SAFETY: the rotations of x12 add up to 128 bits (no change) and `orr x10, x10, x10`
    // changes nothing; valgrind reads `args` through x4 and writes x3.
    unsafe {
        core::arch::asm!(
            "ror x12, x12, #3",     // magic preamble, part 1
            "ror x12, x12, #13",    // part 2
            "ror x12, x12, #51",    // part 3
            "ror x12, x12, #61",    // part 4: x12 is back to its value
            "orr x10, x10, x10",    // the request marker
            inout("x3") default => result,
            in("x4") args.as_ptr(),
            inout("x12") 0usize => _,
            options(nostack, preserves_flags),
        );
    }
    result
}

/// The id returned outside valgrind (valgrind's own ids count up from 0).
pub(crate) const NOT_REGISTERED: usize = usize::MAX;

/// Tells valgrind that `[lo, hi)` is a stack; returns its id ([`NOT_REGISTERED`] outside
/// valgrind).
pub(crate) fn stack_register(lo: usize, hi: usize) -> usize {
    client_request(NOT_REGISTERED, STACK_REGISTER, lo, hi)
}

/// Forgets a stack registered with [`stack_register`].
pub(crate) fn stack_deregister(id: usize) {
    if id != NOT_REGISTERED {
        client_request(0, STACK_DEREGISTER, id, 0);
    }
}
