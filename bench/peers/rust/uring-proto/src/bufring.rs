//! A provided buffer ring (`IORING_REGISTER_PBUF_RING`): buffers the kernel picks from for
//! multishot recv, so that an armed recv needs no buffer of the fiber's.
//!
//! Invariants:
//! - **kernel owns what is in the ring**: a buffer id between the kernel's head and our tail
//!   may be written by the kernel at any time; we touch a buffer only after a completion
//!   handed it to us, and until we give it back with [`BufRing::give_back`].
//! - **tail published last**: an entry is filled before the tail that covers it is stored
//!   (release), so the kernel never sees a half-written entry.
//! - **memory outlives the registration**: the ring and the buffers are freed only after
//!   [`BufRing::unregister`] (the driver calls it before the ring's fd closes).

use std::cell::Cell;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::Submitter;

pub(crate) struct BufRing {
    ring: *mut BufRingEntry,
    ring_len: usize,
    bufs: *mut u8,
    bufs_len: usize,
    entries: u16,
    size: u32,
    tail: Cell<u16>,
    pub(crate) bgid: u16,
}

fn map(len: usize) -> io::Result<*mut u8> {
    // SAFETY: anonymous private mapping, no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

impl BufRing {
    /// `entries` (a power of two) buffers of `size` bytes, registered as group `bgid`.
    pub(crate) fn new(submitter: &Submitter<'_>, entries: u16, size: u32, bgid: u16) -> io::Result<BufRing> {
        assert!(entries.is_power_of_two(), "buffer ring entries must be a power of two");
        let ring_len = entries as usize * std::mem::size_of::<BufRingEntry>();
        let bufs_len = entries as usize * size as usize;
        let ring = map(ring_len)?.cast::<BufRingEntry>();
        let bufs = match map(bufs_len) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: `ring` was mapped above with `ring_len` and is not registered yet.
                unsafe { libc::munmap(ring.cast(), ring_len) };
                return Err(e);
            }
        };
        let br = BufRing { ring, ring_len, bufs, bufs_len, entries, size, tail: Cell::new(0), bgid };
        for bid in 0..entries {
            br.give_back(bid);
        }
        // SAFETY: the ring memory is page-aligned (mmap), `entries` long, and stays mapped
        // until `unregister` has run (see the invariants).
        unsafe { submitter.register_buf_ring(ring as u64, entries, bgid) }?;
        Ok(br)
    }

    /// The first `len` bytes of buffer `bid`, which a completion handed to us.
    pub(crate) fn get(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < self.entries && len <= self.size as usize, "buffer id or length out of range");
        // SAFETY: in bounds (checked); the kernel does not write buffer `bid` while we hold
        // it (given to us by a completion, not yet given back).
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid as usize * self.size as usize), len) }
    }

    /// Hands buffer `bid` back to the kernel.
    pub(crate) fn give_back(&self, bid: u16) {
        let tail = self.tail.get();
        let idx = (tail & (self.entries - 1)) as usize;
        // SAFETY: idx < entries; the slot at our tail is not one the kernel reads (it reads
        // only up to the published tail).
        let e = unsafe { &mut *self.ring.add(idx) };
        // SAFETY: in bounds: bid < entries.
        e.set_addr(unsafe { self.bufs.add(bid as usize * self.size as usize) } as u64);
        e.set_len(self.size);
        e.set_bid(bid);
        let tail = tail.wrapping_add(1);
        self.tail.set(tail);
        // SAFETY: the tail field lives in entry 0 of our mapped, live ring.
        let t = unsafe { BufRingEntry::tail(self.ring) } as *mut u16;
        // SAFETY: the kernel reads the tail concurrently: an atomic store on an aligned u16.
        unsafe { AtomicU16::from_ptr(t) }.store(tail, Ordering::Release);
    }

    pub(crate) fn unregister(&self, submitter: &Submitter<'_>) {
        let _ = submitter.unregister_buf_ring(self.bgid);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: both mappings are ours; the ring was unregistered (or the io_uring fd is
        // closing) before the driver drops us.
        unsafe { libc::munmap(self.ring.cast(), self.ring_len) };
        // SAFETY: as above.
        unsafe { libc::munmap(self.bufs.cast(), self.bufs_len) };
    }
}
