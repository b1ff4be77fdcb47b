//! [`Origin`]: what a handler fiber spawned for a request is named after, the client
//! ([`Peer`], its address written as text once per connection) and the request.

use std::net::SocketAddr;

use hyper::Request;

/// What a handler fiber spawned for a request is made from: its name says which client and
/// request it serves (the stack overflow report and `Server::dump_fibers` show it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    /// The client's address, as text when it is IPv4.
    pub(crate) peer: Peer,
    pub(crate) stack_size: usize,
    /// HTTP/2 (no `Connection` header in answers).
    pub(crate) http2: bool,
}

impl Origin {
    /// `spindle-http 127.0.0.1:5000 POST /upload`: a handler fiber's name (the path cut at
    /// 100 bytes); `spindle-http connection POST /upload` when the peer is unknown. Made for
    /// every request: the IPv4 peer's text is written once per connection ([`Peer`]), and
    /// never through `core::fmt` (which costs more than hyper's parsing of the request); a
    /// name of up to `Name::INLINE` bytes (an IPv4 client and a short path) is built in the
    /// fiber's control block, with no allocation (otherwise an allocation and a free a
    /// request).
    pub(crate) fn handler_name<B>(&self, req: &Request<B>) -> spindle::fiber::Name {
        let path = req.uri().path();
        let cut = (0..=path.len().min(100)).rev().find(|&i| path.is_char_boundary(i)).unwrap_or(0);
        let method = req.method().as_str();
        let v6;
        let peer: &str = match &self.peer {
            // The whole aligned buffer is checked (three words, where its first 15 bytes
            // alone would be checked one by one), then cut.
            Peer::V4 { len, text } => std::str::from_utf8(&text.0)
                .ok()
                .and_then(|text| text.get(..usize::from(*len)))
                .unwrap_or("connection"),
            Peer::V6(addr) => {
                v6 = addr.to_string();
                &v6
            }
            Peer::Unknown => "connection",
        };
        spindle::fiber::Name::concat(&["spindle-http ", peer, " ", method, " ", &path[..cut]])
    }
}

/// A connection's client address as its handler fibers' names need it: an IPv4 address is
/// written as text once, when the connection starts serving (for a request's name, that text
/// is copied, cheaper than writing it for every request), an IPv6 one (rare) is
/// kept as an address and written per request. The size of the `Option<SocketAddr>` it
/// replaces (32 bytes): an idle connection holds no more.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Peer {
    Unknown,
    /// `text.0[..len]`: `a.b.c.d:port`, at most 21 ASCII bytes; the rest is ASCII '0's.
    V4 {
        len: u8,
        text: V4Bytes,
    },
    V6(std::net::SocketAddrV6),
}

/// An IPv4 peer's text and its padding: 24 ASCII bytes aligned to 8, which `str::from_utf8`
/// checks a word at a time.
#[derive(Debug, Clone, Copy)]
#[repr(align(8))]
pub(crate) struct V4Bytes([u8; 24]);

impl Peer {
    pub(crate) fn new(addr: Option<SocketAddr>) -> Peer {
        match addr {
            Some(SocketAddr::V4(addr)) => {
                let mut v4 = V4Text([b'0'; 32]);
                let written = v4.write(addr).as_bytes();
                let mut text = V4Bytes([b'0'; 24]);
                text.0[..written.len()].copy_from_slice(written);
                Peer::V4 { len: written.len() as u8, text }
            }
            Some(SocketAddr::V6(addr)) => Peer::V6(addr),
            None => Peer::Unknown,
        }
    }
}

/// An IPv4 peer's text, written without `core::fmt`: each octet's digits and a dot stored
/// as four bytes from a table, into a buffer of 32 bytes aligned to 8, which `str::from_utf8`
/// checks 16 bytes at a time (cheaper than digits computed by division, then the 15 bytes
/// of `127.0.0.1:50000` checked one by one).
#[repr(align(8))]
struct V4Text([u8; 32]);

impl V4Text {
    /// Writes `a.b.c.d:port` (at most 21 bytes) and returns it.
    fn write(&mut self, addr: std::net::SocketAddrV4) -> &str {
        let buf = &mut self.0;
        let mut len = 0;
        for octet in addr.ip().octets() {
            let (text, width) = OCTETS[usize::from(octet)];
            buf[len..len + 4].copy_from_slice(&text);
            len += usize::from(width);
        }
        // The last octet's dot.
        buf[len - 1] = b':';
        let port = addr.port();
        let width = match port {
            0..=9 => 1,
            10..=99 => 2,
            100..=999 => 3,
            1_000..=9_999 => 4,
            _ => 5,
        };
        let mut n = port;
        for slot in buf[len..len + width].iter_mut().rev() {
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
        }
        len += width;
        // The whole buffer (ASCII digits, dots, a colon, and the '0's it was filled with).
        let text = std::str::from_utf8(buf).expect("ASCII");
        &text[..len]
    }
}

/// Each byte value's decimal text followed by a dot, in four bytes (the rest '0's), and how
/// many of them it takes (`255.` takes four, `7.` two).
static OCTETS: [([u8; 4], u8); 256] = {
    let mut table = [([b'0'; 4], 0); 256];
    let mut b = 0;
    while b < 256 {
        let mut text = [b'0'; 4];
        let mut len = 0;
        if b >= 100 {
            text[len] = b'0' + (b / 100) as u8;
            len += 1;
        }
        if b >= 10 {
            text[len] = b'0' + (b / 10 % 10) as u8;
            len += 1;
        }
        text[len] = b'0' + (b % 10) as u8;
        text[len + 1] = b'.';
        table[b] = (text, len as u8 + 2);
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_fiber_is_named_after_the_peer_and_the_request() {
        let req = Request::post("/upload?x=1").body(()).unwrap();
        let peer: Option<SocketAddr> = Some("127.0.0.1:5000".parse().unwrap());
        let origin = |peer| Origin { peer: Peer::new(peer), stack_size: 0, http2: false };
        let named = |peer| origin(peer).handler_name(&req);
        assert_eq!(named(peer), "spindle-http 127.0.0.1:5000 POST /upload");
        assert_eq!(named(None), "spindle-http connection POST /upload");
        for addr in ["0.0.0.0:0", "255.255.255.255:65535", "10.0.20.3:80", "1.22.133.4:9"] {
            let name = named(Some(addr.parse().unwrap()));
            assert_eq!(&*name, format!("spindle-http {addr} POST /upload"));
            // No allocation when it fits (all but the longest address here).
            assert_eq!(name.is_inline(), name.len() <= spindle::fiber::Name::INLINE, "{name}");
        }
        for b in 0..=255u8 {
            let addr = std::net::SocketAddr::from(([b, 255 - b, b / 2, 9], u16::from(b) * 257));
            assert_eq!(&*named(Some(addr)), format!("spindle-http {addr} POST /upload"), "every octet");
        }
        let v6 = Some("[2001:db8::1%7]:443".parse().unwrap());
        assert_eq!(named(v6), "spindle-http [2001:db8::1%7]:443 POST /upload");
        let long = Request::get(format!("/{}", "é".repeat(80))).body(()).unwrap();
        let name = origin(peer).handler_name(&long);
        assert!(name.len() <= "spindle-http 127.0.0.1:5000 GET ".len() + 100, "the path is cut");
        assert!(name.ends_with('é'), "cut at a char boundary");
    }

    /// The service of every connection, idle or not, holds its peer.
    #[test]
    fn a_peer_takes_no_more_room_than_its_address() {
        assert!(std::mem::size_of::<Peer>() <= std::mem::size_of::<Option<SocketAddr>>());
    }
}
