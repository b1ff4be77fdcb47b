//! A fiber whose stack cannot be mapped fails at `spawn`, not later, and a failure that can
//! only reach the joiner (a fiber spawned from outside the runtime) is also reported on stderr
//! when no logger is installed. The address-space limit (`RLIMIT_AS`) makes `mmap` fail; it is
//! process-wide, so each case runs in a child process (this test binary re-executed).

use std::process::Command;

const CHILD_ENV: &str = "SPINDLE_TEST_SPAWN_ERRORS_CHILD";
/// A stack larger than the address space the child may still map.
const HUGE: usize = 1 << 30;

/// Caps the address space at what is mapped now plus 256 MiB.
fn cap_address_space() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let vm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let limit = vm_kib * 1024 + (256 << 20);
    let rlim = libc::rlimit { rlim_cur: limit, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads the struct we pass; it has no other preconditions.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlim) }, 0);
}

fn run_child(case: &str) -> (bool, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([case, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn child_spawn_on_a_worker() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful when re-executed by the test below
    }
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        cap_address_space();
        let err = spindle::fiber::Builder::new().stack_size(HUGE).spawn(|| ()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::OutOfMemory, "{err}");
        assert!(err.to_string().contains("could not allocate a 1073741824 byte fiber stack"), "{err}");
        // A small stack still works: the failure left nothing behind.
        assert_eq!(spindle::fiber::Builder::new().spawn(|| 7).unwrap().join().unwrap(), 7);
        let panic = std::panic::catch_unwind(|| {
            spindle::fiber::Builder::new()
                .stack_size(HUGE)
                .spawn(|| ())
                .map(|_| ())
                .unwrap_or_else(|e| panic!("{e}"))
        });
        assert!(panic.is_err());
        eprintln!("CHILD OK");
    });
}

#[test]
fn spawn_on_a_worker_fails_at_spawn_when_no_stack_can_be_mapped() {
    let (ok, stderr) = run_child("child_spawn_on_a_worker");
    assert!(ok && stderr.contains("CHILD OK"), "child failed:\n{stderr}");
}

#[test]
fn child_spawn_from_outside() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    cap_address_space();
    let handle =
        spindle::fiber::Builder::new().name("too-big").stack_size(HUGE).spawn_on(&rt, || ()).unwrap();
    let payload = handle.join().unwrap_err();
    let payload = payload.into_panic();
    let message = payload.downcast_ref::<String>().expect("the error message is the payload");
    assert!(message.contains("could not allocate"), "{message}");
    eprintln!("CHILD OK");
}

#[test]
fn spawn_from_outside_reports_the_failure_to_the_joiner_and_on_stderr() {
    let (ok, stderr) = run_child("child_spawn_from_outside");
    assert!(ok && stderr.contains("CHILD OK"), "child failed:\n{stderr}");
    // No logger in the child: the report reaches stderr, naming the fiber.
    assert!(
        stderr.contains("[spindle ERROR]") && stderr.contains("too-big"),
        "no report on stderr:\n{stderr}"
    );
}
