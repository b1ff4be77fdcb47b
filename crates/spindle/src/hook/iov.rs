//! A caller's iovecs, advanced past the bytes already moved: what a call made in several
//! attempts (a socket send that parks between them, a file read finished on the blocking
//! pool) passes to its next attempt.

use libc::iovec;

/// The iovecs of a vectored call, and how far the call got.
pub(super) struct Iovecs {
    v: Vec<iovec>,
    /// The first iovec with bytes left.
    first: usize,
}

impl Iovecs {
    pub(super) fn new(iovs: &[iovec]) -> Iovecs {
        Iovecs { v: iovs.to_vec(), first: 0 }
    }

    /// The iovecs of a call's `count` iovecs at `iov` (none when `count` is not positive).
    ///
    /// # Safety
    ///
    /// A positive `count` means `iov` points to `count` iovecs.
    pub(super) unsafe fn from_raw(iov: *const iovec, count: usize) -> Iovecs {
        if count == 0 {
            return Iovecs::new(&[]);
        }
        // SAFETY: the caller's contract.
        Iovecs::new(unsafe { std::slice::from_raw_parts(iov, count) })
    }

    /// The bytes the iovecs describe, in all.
    pub(super) fn len(&self) -> usize {
        self.v[self.first..].iter().map(|v| v.iov_len).sum()
    }

    /// Moves past `n` bytes (that many were moved).
    pub(super) fn advance(&mut self, mut n: usize) {
        while n > 0 && self.first < self.v.len() {
            let v = &mut self.v[self.first];
            let take = n.min(v.iov_len);
            // SAFETY: `take` is within this iovec's buffer.
            v.iov_base = unsafe { v.iov_base.cast::<u8>().add(take) }.cast();
            v.iov_len -= take;
            n -= take;
            if v.iov_len == 0 {
                self.first += 1;
            }
        }
    }

    /// The iovecs with bytes left, as a call takes them.
    pub(super) fn rest(&mut self) -> &mut [iovec] {
        &mut self.v[self.first..]
    }
}
