//! Making a FIFO, for tests whose reader or writer must wait on the other side. Included
//! with `#[path]` (this directory is not a test target of its own).

use std::io;
use std::path::Path;

pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo: {}", io::Error::last_os_error());
}
