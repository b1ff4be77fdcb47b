//! Blocking-style TCP sockets for the prototype's fibers (IPv4 only), on whichever driver the
//! loop runs: the same calls a spindle fiber makes (`accept`, `connect`, `read`, `write_all`).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;

use crate::epoll::Dir;
use crate::rt::{rt, Driver};

fn cvt(r: i32) -> io::Result<i32> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn sockaddr(addr: SocketAddr) -> io::Result<libc::sockaddr_in> {
    let SocketAddr::V4(a) = addr else {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "uring_proto sockets are IPv4 only"));
    };
    Ok(libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    })
}

/// A new TCP socket; non-blocking on the epoll driver (the io_uring driver needs no flag).
fn socket() -> io::Result<RawFd> {
    let nonblock = if matches!(rt().driver, Driver::Epoll(_)) { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: plain syscall, no pointers.
    cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | nonblock, 0) })
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    let len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` is a live i32 of `len` bytes for the call.
    cvt(unsafe { libc::setsockopt(fd, level, name, (&v as *const i32).cast(), len) }).map(drop)
}

fn close(fd: RawFd) {
    match &rt().driver {
        Driver::Epoll(e) => {
            e.forget(fd);
            // SAFETY: the socket owns `fd` and closes it once (from Drop).
            unsafe { libc::close(fd) };
        }
        Driver::Uring(u) => u.close(fd),
    }
}

/// A listening socket (SO_REUSEADDR and SO_REUSEPORT, backlog 1,024: monoio's defaults).
pub struct TcpListener {
    fd: RawFd,
}

impl TcpListener {
    pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
        let sa = sockaddr(addr)?;
        let l = TcpListener { fd: socket()? };
        setsockopt_int(l.fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        setsockopt_int(l.fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `sa` is a valid sockaddr_in of `len` bytes.
        cvt(unsafe { libc::bind(l.fd, (&sa as *const libc::sockaddr_in).cast(), len) })?;
        // SAFETY: plain syscall.
        cvt(unsafe { libc::listen(l.fd, 1024) })?;
        Ok(l)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        // SAFETY: all-zero is a valid sockaddr_in.
        let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `sa` and `len` are live and describe a sockaddr_in buffer.
        cvt(unsafe { libc::getsockname(self.fd, (&mut sa as *mut libc::sockaddr_in).cast(), &mut len) })?;
        let ip = Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr));
        Ok(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sa.sin_port))))
    }

    /// Parks the fiber until a connection arrives.
    pub fn accept(&self) -> io::Result<TcpStream> {
        let fd = match &rt().driver {
            Driver::Uring(u) => u.accept(self.fd)?,
            Driver::Epoll(e) => loop {
                let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
                // SAFETY: null address pointers are allowed by accept4.
                let r = unsafe { libc::accept4(self.fd, std::ptr::null_mut(), std::ptr::null_mut(), flags) };
                match cvt(r) {
                    Ok(fd) => break fd,
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => e.wait(self.fd, Dir::Read)?,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(err) => return Err(err),
                }
            },
        };
        Ok(TcpStream { fd })
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        close(self.fd);
    }
}

/// A connected socket.
pub struct TcpStream {
    fd: RawFd,
}

impl TcpStream {
    /// Parks the fiber until the connection is established.
    pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let sa = sockaddr(addr)?;
        let s = TcpStream { fd: socket()? };
        match &rt().driver {
            Driver::Uring(u) => u.connect(s.fd, &sa)?,
            Driver::Epoll(e) => {
                let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                // SAFETY: `sa` is a valid sockaddr_in of `len` bytes.
                let r = unsafe { libc::connect(s.fd, (&sa as *const libc::sockaddr_in).cast(), len) };
                if r < 0 {
                    let err = io::Error::last_os_error();
                    if err.raw_os_error() != Some(libc::EINPROGRESS) {
                        return Err(err);
                    }
                    e.wait(s.fd, Dir::Write)?;
                    let mut v: i32 = 0;
                    let mut vl = std::mem::size_of::<i32>() as libc::socklen_t;
                    // SAFETY: `v` and `vl` are live and describe an i32.
                    cvt(unsafe {
                        libc::getsockopt(
                            s.fd,
                            libc::SOL_SOCKET,
                            libc::SO_ERROR,
                            (&mut v as *mut i32).cast(),
                            &mut vl,
                        )
                    })?;
                    if v != 0 {
                        return Err(io::Error::from_raw_os_error(v));
                    }
                }
            }
        }
        Ok(s)
    }

    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        setsockopt_int(self.fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, on as i32)
    }

    /// Parks the fiber until some bytes (or EOF: 0) arrive.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &rt().driver {
            Driver::Uring(u) => u.recv(self.fd, buf),
            Driver::Epoll(e) => loop {
                if e.drained(self.fd, Dir::Read) {
                    e.wait(self.fd, Dir::Read)?;
                }
                // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
                let r = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
                match cvt(r as i32) {
                    Ok(n) => {
                        if n > 0 && (n as usize) < buf.len() {
                            e.note_drained(self.fd, Dir::Read);
                        }
                        return Ok(n as usize);
                    }
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => e.wait(self.fd, Dir::Read)?,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(err) => return Err(err),
                }
            },
        }
    }

    /// Parks the fiber until some bytes were sent.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &rt().driver {
            Driver::Uring(u) => u.send(self.fd, buf),
            Driver::Epoll(e) => loop {
                if e.drained(self.fd, Dir::Write) {
                    e.wait(self.fd, Dir::Write)?;
                }
                // SAFETY: `buf` is a live buffer of `buf.len()` bytes.
                let r = unsafe { libc::send(self.fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
                match cvt(r as i32) {
                    Ok(n) => {
                        if (n as usize) < buf.len() {
                            e.note_drained(self.fd, Dir::Write);
                        }
                        return Ok(n as usize);
                    }
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => e.wait(self.fd, Dir::Write)?,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(err) => return Err(err),
                }
            },
        }
    }

    pub fn read_exact(&mut self, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read(buf)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }

    pub fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write(buf)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => buf = &buf[n..],
            }
        }
        Ok(())
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        close(self.fd);
    }
}
