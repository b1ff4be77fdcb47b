//! A caller's byte buffer handed to a socket read, which writes into uninitialised memory.

/// `buf` as a socket read sees it: room to write bytes into (socket2's and the kernel's
/// reads take `MaybeUninit<u8>`).
pub(super) fn as_uninit(buf: &mut [u8]) -> &mut [std::mem::MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and the reads this is handed to
    // write only initialised bytes, so `buf` stays initialised.
    unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) }
}
