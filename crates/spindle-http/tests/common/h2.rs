//! A raw HTTP/2 client over a std socket, frame by frame (RFC 9113), for tests that must do
//! what a well-behaved client library never does: reset streams at will, never open its
//! flow-control window, send frames after a GOAWAY. Request headers are HPACK literals (no
//! dynamic table); response headers are not decoded (a HEADERS frame means "answered").

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

pub const CANCEL: u32 = 0x8;
pub const REFUSED_STREAM: u32 = 0x7;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// One frame read from the server.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    pub fn error_code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }

    /// A GOAWAY's debug text.
    pub fn debug_text(&self) -> String {
        String::from_utf8_lossy(&self.payload[8..]).into_owned()
    }
}

/// How a read of the next frame ended when there was none.
#[derive(Debug)]
pub enum End {
    /// The server closed the connection cleanly (FIN).
    Closed,
    /// The read failed: a reset (`ConnectionReset`), or the test's patience ran out.
    Error(std::io::Error),
}

pub struct Client {
    pub stream: TcpStream,
    next_stream: u32,
    /// DATA bytes received so far, by stream.
    received: std::collections::HashMap<u32, usize>,
}

impl Client {
    /// Connects, sends the preface and an empty SETTINGS frame.
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut client = Client { stream, next_stream: 1, received: Default::default() };
        client.stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
        client.send(SETTINGS, 0, 0, &[]);
        client
    }

    pub fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        self.try_send(kind, flags, stream, payload).unwrap();
    }

    pub fn try_send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> std::io::Result<()> {
        let mut frame = Vec::with_capacity(9 + payload.len());
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        frame.extend_from_slice(&[kind, flags]);
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame)
    }

    /// Opens a stream with a GET of `path` (no body); its id.
    pub fn get(&mut self, path: &str) -> u32 {
        self.try_get(path).unwrap()
    }

    pub fn try_get(&mut self, path: &str) -> std::io::Result<u32> {
        let id = self.next_stream;
        self.next_stream += 2;
        let mut block = vec![0x82, 0x86]; // :method GET, :scheme http (static table)
        literal(&mut block, 0x04, path); // :path
        literal(&mut block, 0x01, "localhost"); // :authority
        self.try_send(HEADERS, END_HEADERS | END_STREAM, id, &block)?;
        Ok(id)
    }

    pub fn reset(&mut self, stream: u32, code: u32) {
        self.send(RST_STREAM, 0, stream, &code.to_be_bytes());
    }

    /// The next frame, acknowledging the server's SETTINGS and PINGs on the way (those are
    /// returned too).
    pub fn next(&mut self) -> Result<Frame, End> {
        let mut head = [0u8; 9];
        if let Err(e) = self.stream.read_exact(&mut head) {
            return Err(if e.kind() == ErrorKind::UnexpectedEof { End::Closed } else { End::Error(e) });
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        if let Err(e) = self.stream.read_exact(&mut payload) {
            return Err(if e.kind() == ErrorKind::UnexpectedEof { End::Closed } else { End::Error(e) });
        }
        let frame = Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5] & 0x7f, head[6], head[7], head[8]]),
            payload,
        };
        if frame.kind == DATA {
            *self.received.entry(frame.stream).or_default() += frame.payload.len();
        }
        if frame.kind == SETTINGS && frame.flags & ACK == 0 {
            let _ = self.try_send(SETTINGS, ACK, 0, &[]);
        }
        if frame.kind == PING && frame.flags & ACK == 0 {
            let payload = frame.payload.clone();
            let _ = self.try_send(PING, ACK, 0, &payload);
        }
        Ok(frame)
    }

    /// Reads frames until one matches `pred`; panics at the connection's end.
    pub fn until(&mut self, what: &str, mut pred: impl FnMut(&Frame) -> bool) -> Frame {
        loop {
            match self.next() {
                Ok(frame) if pred(&frame) => return frame,
                Ok(_) => {}
                Err(end) => panic!("connection ended ({end:?}) while waiting for {what}"),
            }
        }
    }

    /// The DATA bytes received on stream `id` so far.
    pub fn received(&self, id: u32) -> usize {
        self.received.get(&id).copied().unwrap_or(0)
    }

    /// How the stream `id` was answered: a HEADERS frame, or a RST_STREAM (its code).
    pub fn outcome(&mut self, id: u32) -> Result<(), u32> {
        let frame =
            self.until("an answer", |f| f.stream == id && (f.kind == HEADERS || f.kind == RST_STREAM));
        if frame.kind == HEADERS {
            Ok(())
        } else {
            Err(frame.error_code())
        }
    }

    /// Reads frames to the connection's end; the frames read and how it ended.
    pub fn drain(&mut self) -> (Vec<Frame>, End) {
        let mut frames = Vec::new();
        loop {
            match self.next() {
                Ok(frame) => frames.push(frame),
                Err(end) => return (frames, end),
            }
        }
    }
}

/// An HPACK "literal header field without indexing" with an indexed name (RFC 7541 §6.2.2).
fn literal(block: &mut Vec<u8>, name_index: u8, value: &str) {
    assert!(value.len() < 127);
    block.push(name_index);
    block.push(value.len() as u8);
    block.extend_from_slice(value.as_bytes());
}
