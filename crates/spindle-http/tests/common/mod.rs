//! Raw-socket client helpers for the server tests.
#![allow(dead_code)]

pub mod h2;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// A parsed response: status code, headers (lowercased names) and the body (de-chunked).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

/// Reads one response from a buffered connection (`buf` keeps bytes read past it).
pub fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Resp> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        if !fill(s, buf) {
            return None;
        }
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let mut resp = Resp { status, headers, body: Vec::new() };
    if let Some(len) = resp.header("content-length") {
        let len: usize = len.parse().unwrap();
        while buf.len() < len {
            assert!(fill(s, buf), "EOF inside a body");
        }
        resp.body = buf.drain(..len).collect();
    } else if resp.header("transfer-encoding") == Some("chunked") {
        loop {
            let line_end = loop {
                if let Some(i) = find(buf, b"\r\n") {
                    break i;
                }
                assert!(fill(s, buf), "EOF inside a chunk size");
            };
            let size =
                usize::from_str_radix(std::str::from_utf8(&buf[..line_end]).unwrap().trim(), 16).unwrap();
            buf.drain(..line_end + 2);
            while buf.len() < size + 2 {
                assert!(fill(s, buf), "EOF inside a chunk");
            }
            resp.body.extend(buf.drain(..size));
            buf.drain(..2);
            if size == 0 {
                break;
            }
        }
    }
    Some(resp)
}

fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match s.read(&mut chunk) {
        Ok(0) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => false,
        Err(e) => panic!("read: {e}"),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One request on a fresh connection.
pub fn get(addr: SocketAddr, path: &str) -> Resp {
    let mut s = connect(addr);
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    read_response(&mut s, &mut Vec::new()).expect("a response")
}

/// Writes `raw` and returns everything the server sends until it closes.
pub fn raw_exchange(addr: SocketAddr, raw: &[u8]) -> String {
    let mut s = connect(addr);
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn status_line(response: &str) -> &str {
    response.split("\r\n").next().unwrap_or("")
}
