//! A tokio panic for want of its context, on a spindle worker, is followed by a line that says
//! how to give it one: the `tokio-compat` feature (or, with it, the runtime's
//! `Builder::tokio_context`). The test runs itself in a child process to read its stderr.

use std::process::Command;
use std::time::Duration;

const CHILD: &str = "SPINDLE_TOKIO_HINT_CHILD";

#[test]
fn a_tokio_context_panic_on_a_worker_names_the_way_out() {
    if std::env::var_os(CHILD).is_some() {
        let mut builder = spindle::Builder::new();
        builder.worker_threads(1);
        #[cfg(feature = "tokio-compat")]
        builder.tokio_context(false);
        let rt = builder.build().unwrap();
        let joined = rt.spawn(|| drop(tokio::time::sleep(Duration::from_millis(1)))).join();
        assert!(joined.unwrap_err().is_panic());
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_tokio_context_panic_on_a_worker_names_the_way_out", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("there is no reactor running"), "{stderr}");
    let way_out = if cfg!(feature = "tokio-compat") {
        "Builder::tokio_context(false)"
    } else {
        "`tokio-compat` feature"
    };
    assert!(stderr.contains(way_out), "{stderr}");
}
