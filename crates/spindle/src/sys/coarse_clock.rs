//! The coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`): the time of the last kernel tick,
//! read from the vDSO without touching the TSC, several times cheaper than
//! `CLOCK_MONOTONIC`, `Instant::now`'s clock (`docs/perf/tcp.md`, "Clock reads").
//! Good for what only sums or compares long
//! spans (a worker's sleep statistics, its 200 ms trim of idle caches): a span measured with
//! it is off by up to one tick either way, and unbiased on average. Never for timers.

/// Nanoseconds on the coarse monotonic clock (an arbitrary origin, as `Instant`'s).
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable `timespec` for the call's duration, and
    // CLOCK_MONOTONIC_COARSE exists on every Linux spindle supports (2.6.32+).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC_COARSE) failed");
    u64::try_from(ts.tv_sec).unwrap_or(0).saturating_mul(1_000_000_000)
        + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn never_goes_back_and_follows_the_precise_clock() {
        let a = super::now_ns();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = super::now_ns();
        assert!(b >= a);
        // 30 ms asleep: at least one tick (CONFIG_HZ >= 100) has passed.
        assert!(b - a >= 10_000_000, "{} ns", b - a);
    }
}
