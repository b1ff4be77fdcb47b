//! The table that keeps every interposed function in the program (see [`link`]).

use super::{file, poll, sleep, socket, transfer};

/// Keeps the interposed functions in every program that uses a runtime: the linker takes an
/// archive member only for a symbol it needs at the time, and `std`, whose calls these
/// functions must catch, comes after spindle on the link line. The runtime's builder refers
/// to this table, which refers to every function.
pub(crate) fn link() {
    std::hint::black_box(INTERPOSED.0.as_ptr());
}

/// The interposed functions, as addresses (see [`link`]).
struct Interposed([*const (); 53]);

// SAFETY: the table holds function addresses, which are never written or dereferenced as data.
unsafe impl Sync for Interposed {}

static INTERPOSED: Interposed = Interposed([
    socket::socket as *const (),
    socket::connect as *const (),
    socket::accept as *const (),
    socket::accept4 as *const (),
    transfer::read as *const (),
    transfer::write as *const (),
    transfer::readv as *const (),
    transfer::writev as *const (),
    transfer::recv as *const (),
    transfer::recvfrom as *const (),
    transfer::recvmsg as *const (),
    transfer::send as *const (),
    transfer::sendto as *const (),
    transfer::sendmsg as *const (),
    socket::close as *const (),
    socket::setsockopt as *const (),
    socket::fcntl as *const (),
    socket::ioctl as *const (),
    socket::dup as *const (),
    socket::dup2 as *const (),
    socket::dup3 as *const (),
    poll::poll as *const (),
    poll::ppoll as *const (),
    poll::select as *const (),
    poll::pselect as *const (),
    poll::epoll_wait as *const (),
    poll::epoll_pwait as *const (),
    sleep::nanosleep as *const (),
    sleep::clock_nanosleep as *const (),
    sleep::usleep as *const (),
    sleep::sleep as *const (),
    file::pread as *const (),
    file::pread64 as *const (),
    file::pwrite as *const (),
    file::pwrite64 as *const (),
    file::preadv as *const (),
    file::preadv64 as *const (),
    file::pwritev as *const (),
    file::pwritev64 as *const (),
    file::fsync as *const (),
    file::fdatasync as *const (),
    file::open as *const (),
    file::open64 as *const (),
    file::openat as *const (),
    file::openat64 as *const (),
    file::creat as *const (),
    file::creat64 as *const (),
    file::stat as *const (),
    file::stat64 as *const (),
    file::lstat as *const (),
    file::lstat64 as *const (),
    file::fstatat as *const (),
    file::fstatat64 as *const (),
]);
