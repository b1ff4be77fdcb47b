//! The timer wheel against its contract and against a simple model.

use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// The last tick of the levels' span after tick 0, where deadlines farther away were once
/// clamped (and fired early).
const MAX_SPAN_TICKS: u64 = (1 << WHEEL_BITS) - 1;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Advances and returns the fired values in firing order.
fn fired<T>(wheel: &mut TimerWheel<T>, now: Instant) -> Vec<T> {
    let mut out = Vec::new();
    wheel.advance(now, |v| out.push(v));
    out
}

#[test]
fn fires_in_deadline_order() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    for (i, d) in [50u64, 3, 700, 64, 1, 63, 65, 5000, 4095, 4096, 2].iter().enumerate() {
        w.insert(o + ms(*d), (*d, i));
    }
    assert_eq!(w.len(), 11);
    let got: Vec<u64> = fired(&mut w, o + ms(10_000)).into_iter().map(|(d, _)| d).collect();
    assert_eq!(got, vec![1, 2, 3, 50, 63, 64, 65, 700, 4095, 4096, 5000]);
    assert!(w.is_empty());
    assert_eq!(w.next_deadline(), None);
}

#[test]
fn equal_deadlines_fire_together() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    for i in 0..5 {
        w.insert(o + ms(100), i);
    }
    assert!(fired(&mut w, o + ms(99)).is_empty());
    let mut got = fired(&mut w, o + ms(100));
    got.sort_unstable();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
}

#[test]
fn never_fires_early() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    w.insert(o + Duration::from_micros(1_500), "1.5ms");
    w.insert(o + ms(3), "3ms");
    w.insert(o + Duration::from_nanos(3_000_001), "3ms+1ns");
    // Rounded up to the tick: 1.5 ms -> 2 ms, 3 ms + 1 ns -> 4 ms.
    assert_eq!(w.next_deadline(), Some(o + ms(2)));
    assert!(fired(&mut w, o + Duration::from_micros(1_999)).is_empty());
    assert_eq!(fired(&mut w, o + ms(2)), vec!["1.5ms"]);
    assert_eq!(w.next_deadline(), Some(o + ms(3)));
    assert!(fired(&mut w, o + Duration::from_nanos(2_999_999)).is_empty());
    assert_eq!(fired(&mut w, o + ms(3)), vec!["3ms"]);
    assert!(fired(&mut w, o + Duration::from_nanos(3_999_999)).is_empty());
    assert_eq!(fired(&mut w, o + ms(4)), vec!["3ms+1ns"]);
}

#[test]
fn cancel_before_fire_returns_value_and_never_fires() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let a = w.insert(o + ms(10), 'a');
    let b = w.insert(o + ms(100_000), 'b');
    let c = w.insert(o + ms(10), 'c');
    assert_eq!(w.cancel(a), Some('a'));
    assert_eq!(w.cancel(b), Some('b'));
    assert_eq!(w.len(), 1);
    assert_eq!(w.cancel(a), None, "double cancel");
    assert_eq!(fired(&mut w, o + ms(1_000_000)), vec!['c']);
    assert_eq!(w.cancel(c), None);
    assert!(w.is_empty());
}

#[test]
fn cancel_after_fire_returns_none() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let k = w.insert(o + ms(5), 1);
    assert_eq!(fired(&mut w, o + ms(5)), vec![1]);
    assert_eq!(w.cancel(k), None);
}

#[test]
fn stale_key_after_reuse_cancels_nothing() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let old = w.insert(o + ms(5), "old");
    assert_eq!(w.cancel(old), Some("old"));
    let new = w.insert(o + ms(7), "new");
    assert_eq!(new.index, old.index, "the slab entry is reused");
    assert_ne!(new, old);
    assert_eq!(w.cancel(old), None);
    assert_eq!(w.len(), 1);
    assert_eq!(fired(&mut w, o + ms(7)), vec!["new"]);

    // Same after the entry fired and was reused.
    let fired_key = w.insert(o + ms(8), "a");
    assert_eq!(fired(&mut w, o + ms(8)), vec!["a"]);
    let reuse = w.insert(o + ms(9), "b");
    assert_eq!(reuse.index, fired_key.index);
    assert_eq!(w.cancel(fired_key), None);
    assert_eq!(fired(&mut w, o + ms(9)), vec!["b"]);
}

/// Deadlines in every level, some on slot boundaries.
fn far_deadlines() -> Vec<u64> {
    let mut v = Vec::new();
    for level in 0..LEVELS as u32 {
        let width = 1u64 << (SLOT_BITS * level);
        for k in [1, 2, 63] {
            v.push(width * k);
            v.push(width * k + 1);
            v.push(width * k + width / 2 + 7);
        }
    }
    v.push(MAX_SPAN_TICKS);
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn far_future_cascades_in_big_jumps() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let deadlines = far_deadlines();
    for &d in deadlines.iter().rev() {
        w.insert(o + ms(d), d);
    }
    let mut all = Vec::new();
    let mut now = 0u64;
    while !w.is_empty() {
        let before = now;
        now = now * 3 + 17;
        for d in fired(&mut w, o + ms(now)) {
            assert!(d <= now && d > before, "{d} fired at {now}");
            all.push(d);
        }
    }
    assert_eq!(all, deadlines);
}

#[test]
fn far_future_cascades_exactly_on_time() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let deadlines = far_deadlines();
    for &d in &deadlines {
        w.insert(o + ms(d), d);
    }
    // Jump to 1 ms before each deadline, then step 1 ms at a time: each fires exactly then.
    for &d in &deadlines {
        assert_eq!(w.next_deadline(), Some(o + ms(d)));
        assert!(fired(&mut w, o + ms(d - 1)).is_empty(), "{d} fired early");
        assert_eq!(fired(&mut w, o + ms(d)), vec![d]);
    }
    assert!(w.is_empty());
}

#[test]
fn one_ms_steps_through_several_levels() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let deadlines = [1u64, 63, 64, 65, 127, 128, 4095, 4096, 4097, 8191, 262_143, 262_144, 262_145, 300_001];
    for &d in &deadlines {
        w.insert(o + ms(d), d);
    }
    let mut all = Vec::new();
    for t in 0..=300_001u64 {
        for d in fired(&mut w, o + ms(t)) {
            assert_eq!(d, t);
            all.push(d);
        }
    }
    assert_eq!(all, deadlines);
}

#[test]
fn next_deadline_is_exact_across_levels() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    assert_eq!(w.next_deadline(), None);
    // All in the same level-2 slot (4096..8192): the exact minimum, not the slot start.
    let k1 = w.insert(o + Duration::from_micros(5_000_300), 1);
    let k2 = w.insert(o + ms(6_000), 2);
    let _k3 = w.insert(o + ms(7_000), 3);
    let check = |w: &TimerWheel<i32>, real: Duration, rounded: Duration| {
        let next = w.next_deadline().unwrap();
        assert!(next >= o + real && next <= o + rounded, "{:?}", next - o);
    };
    check(&w, Duration::from_micros(5_000_300), ms(5_001));
    assert_eq!(w.cancel(k1), Some(1));
    check(&w, ms(6_000), ms(6_000));
    // An earlier timer in a lower level.
    let k4 = w.insert(o + ms(10), 4);
    check(&w, ms(10), ms(10));
    assert_eq!(w.cancel(k4), Some(4));
    assert_eq!(w.cancel(k2), Some(2));
    check(&w, ms(7_000), ms(7_000));
    assert!(fired(&mut w, o + ms(6_999)).is_empty());
    check(&w, ms(7_000), ms(7_000));
    assert_eq!(fired(&mut w, o + ms(7_000)), vec![3]);
    assert_eq!(w.next_deadline(), None);
}

#[test]
fn past_deadline_fires_on_next_advance() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    w.insert(o + ms(1000), "later");
    assert!(fired(&mut w, o + ms(500)).is_empty());
    w.insert(o + ms(100), "past");
    w.insert(o + ms(500), "now");
    w.insert(o, "origin");
    assert_eq!(w.next_deadline(), Some(o + ms(0)));
    // Even when advanced with a time before those deadlines (time does not go back).
    let mut got = fired(&mut w, o + ms(10));
    got.sort_unstable();
    assert_eq!(got, vec!["now", "origin", "past"]);
    assert_eq!(w.next_deadline(), Some(o + ms(1000)));
    // A deadline before the origin is tick 0.
    let mut w2 = TimerWheel::new(o + ms(50));
    w2.insert(o, "before origin");
    assert_eq!(w2.next_deadline(), Some(o + ms(50)));
    assert_eq!(fired(&mut w2, o), vec!["before origin"]);
}

/// A deadline farther than the levels span waits in the overflow list, block after block,
/// and fires at its own tick: reaching `MAX_SPAN_TICKS` (where it used to be clamped and
/// fired early) or a block boundary fires nothing.
#[test]
fn deadlines_beyond_the_top_level_fire_at_their_real_deadline() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let block = 1u64 << WHEEL_BITS;
    let far = 3 * block + 12_345; // about 6.5 years
    w.insert(o + ms(far), "far");
    w.insert(o + ms(far + 1), "later");
    assert_eq!(fired(&mut w, o + ms(MAX_SPAN_TICKS)), Vec::<&str>::new(), "fired early");
    assert_eq!(w.len(), 2);
    assert_eq!(w.next_deadline(), Some(o + ms(far)));
    // Every block boundary on the way, and 1 ms either side of it.
    for b in 1..=3 {
        for t in [b * block - 1, b * block, b * block + 1] {
            assert!(fired(&mut w, o + ms(t)).is_empty(), "fired at {t}, before {far}");
            assert_eq!(w.next_deadline(), Some(o + ms(far)));
        }
    }
    assert!(fired(&mut w, o + ms(far - 1)).is_empty());
    assert_eq!(fired(&mut w, o + ms(far)), vec!["far"]);
    assert_eq!(w.next_deadline(), Some(o + ms(far + 1)));
    assert_eq!(fired(&mut w, o + ms(far + 1)), vec!["later"]);
    assert!(w.is_empty());

    // One big jump past several blocks fires what it passes, in order; a far timer can be
    // cancelled.
    let mut w = TimerWheel::new(o);
    w.insert(o + ms(5 * block), "b");
    w.insert(o + ms(4 * block + 7), "a");
    let c = w.insert(o + ms(20 * block), "c");
    assert!(fired(&mut w, o + ms(4 * block + 6)).is_empty());
    assert_eq!(fired(&mut w, o + ms(9 * block)), vec!["a", "b"]);
    assert_eq!(w.next_deadline(), Some(o + ms(20 * block)));
    assert_eq!(w.cancel(c), Some("c"));
    assert!(w.is_empty());
}

/// A deadline beyond `u64::MAX` ms after the origin (which an `Instant` can hold) counts as
/// that tick: it waits, and never wraps around to fire early.
#[test]
fn deadlines_beyond_the_last_tick_never_fire() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let Some(end) = o.checked_add(Duration::from_secs(1 << 62)) else { return };
    w.insert(end, "end of time");
    w.insert(o + ms(10), "soon");
    assert_eq!(fired(&mut w, o + ms(10)), vec!["soon"]);
    assert!(fired(&mut w, o + ms(100 * (1 << WHEEL_BITS))).is_empty());
    assert_eq!(w.len(), 1);
    assert!(w.next_deadline().is_some_and(|d| d > o + ms(100 * (1 << WHEEL_BITS))));
}

#[test]
fn crosses_into_the_next_top_level_block() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o);
    let block = 1u64 << WHEEL_BITS;
    assert!(fired(&mut w, o + ms(block - 10)).is_empty());
    // These lie in the next 2^36-tick block: the overflow list.
    w.insert(o + ms(block + 3_600_000), 3);
    w.insert(o + ms(block), 2);
    w.insert(o + ms(block + 70), 1);
    w.insert(o + ms(block - 5), 0);
    let d = block - 10 + MAX_SPAN_TICKS;
    w.insert(o + ms(d), 4);
    assert_eq!(w.next_deadline(), Some(o + ms(block - 5)));
    assert_eq!(fired(&mut w, o + ms(block - 1)), vec![0]);
    assert_eq!(w.next_deadline(), Some(o + ms(block)));
    assert_eq!(fired(&mut w, o + ms(block)), vec![2]);
    assert_eq!(w.next_deadline(), Some(o + ms(block + 70)));
    assert!(fired(&mut w, o + ms(block + 69)).is_empty());
    assert_eq!(fired(&mut w, o + ms(block + 3_600_000)), vec![1, 3]);
    assert_eq!(w.next_deadline(), Some(o + ms(d)));
    assert!(fired(&mut w, o + ms(d - 1)).is_empty());
    assert_eq!(fired(&mut w, o + ms(d)), vec![4]);
}

#[test]
fn advance_backwards_is_a_no_op() {
    let o = Instant::now();
    let mut w = TimerWheel::new(o + ms(1000));
    w.insert(o + ms(1020), 1);
    assert!(fired(&mut w, o + ms(1010)).is_empty());
    assert!(fired(&mut w, o).is_empty());
    assert!(fired(&mut w, o + ms(1005)).is_empty());
    assert_eq!(fired(&mut w, o + ms(1020)), vec![1]);
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn randomized_against_a_model() {
    for seed in [0x9e37_79b9_7f4a_7c15u64, 1, 0xdead_beef] {
        model_run(seed, 10_000, false);
    }
}

/// The same with a tenth of the deadlines and time jumps measured in `2^36` ms blocks (years):
/// timers wait in the overflow list across block boundaries and still fire exactly on time.
#[test]
fn randomized_against_a_model_across_blocks() {
    for seed in [0x9e37_79b9_7f4a_7c15u64, 7, 0xdead_beef] {
        model_run(seed, 2_000, true);
    }
}

/// `far`: some deadlines up to 4 blocks ahead, some jumps up to 2 blocks (the clock, in
/// nanoseconds, stays far from `u64::MAX` at 2,000 operations).
fn model_run(seed: u64, ops: usize, far: bool) {
    const MS_NS: u64 = 1_000_000;
    let o = Instant::now();
    let mut rng = Rng(seed);
    let mut w = TimerWheel::new(o);
    // id -> (tick, key); and (tick, id) for the pending timers.
    let mut live: BTreeMap<u64, (u64, TimerKey)> = BTreeMap::new();
    let mut by_tick: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut keys: Vec<(u64, TimerKey)> = Vec::new();
    let mut tick_of: Vec<u64> = Vec::new();
    let mut now_ns = 0u64;
    let mut last_tick = 0u64;
    let mut next_id = 0u64;
    let mut buf = Vec::new();
    for _ in 0..ops {
        match rng.below(100) {
            0..=44 => {
                // Deadlines from 0 ms to several hours ahead, some in the past, with ns parts.
                let ahead = match rng.below(10) {
                    0 => 0,
                    1..=4 => rng.below(200 * MS_NS),
                    5..=7 => rng.below(60_000 * MS_NS),
                    _ if far => rng.below(4 << WHEEL_BITS) * MS_NS + rng.below(MS_NS),
                    _ => rng.below(5 * 3_600_000 * MS_NS),
                };
                let deadline_ns =
                    if rng.below(10) == 0 { now_ns.saturating_sub(ahead) } else { now_ns + ahead };
                let id = next_id;
                next_id += 1;
                let key = w.insert(o + Duration::from_nanos(deadline_ns), id);
                let tick = deadline_ns.div_ceil(MS_NS);
                live.insert(id, (tick, key));
                by_tick.insert((tick, id));
                keys.push((id, key));
                tick_of.push(tick);
            }
            45..=69 => {
                if keys.is_empty() {
                    continue;
                }
                let (id, key) = keys[rng.below(keys.len() as u64) as usize];
                let expect = live.remove(&id).map(|(tick, _)| {
                    by_tick.remove(&(tick, id));
                    id
                });
                assert_eq!(w.cancel(key), expect);
            }
            _ => {
                now_ns += match rng.below(10) {
                    0..=4 => rng.below(5 * MS_NS),
                    5..=7 => rng.below(5_000 * MS_NS),
                    _ if far => rng.below(2 << WHEEL_BITS) * MS_NS,
                    _ => rng.below(3_600_000 * MS_NS),
                };
                let now_tick = now_ns / MS_NS;
                buf.clear();
                w.advance(o + Duration::from_nanos(now_ns), |id| buf.push(id));
                // Exactly the model's timers with rounded deadline <= now fired, in tick order
                // (those inserted with a deadline before the last advance come first).
                let mut expect: Vec<u64> = Vec::new();
                while let Some(&(tick, id)) = by_tick.first() {
                    if tick > now_tick {
                        break;
                    }
                    by_tick.pop_first();
                    live.remove(&id);
                    expect.push(id);
                }
                let mut got = buf.clone();
                got.sort_unstable();
                expect.sort_unstable();
                assert_eq!(got, expect, "at {now_ns} ns");
                // Tick order: first the timers that were already due at the previous advance
                // (inserted since with a past deadline), then non-decreasing later ticks.
                let ticks: Vec<u64> = buf.iter().map(|&id| tick_of[id as usize]).collect();
                let late = ticks.iter().position(|&t| t > last_tick).unwrap_or(ticks.len());
                assert!(ticks[late..].iter().all(|&t| t > last_tick));
                assert!(ticks[late..].windows(2).all(|p| p[0] <= p[1]), "{ticks:?}");
                last_tick = last_tick.max(now_tick);
            }
        }
        assert_eq!(w.len(), live.len());
        let next = w.next_deadline();
        let expect = by_tick.first().map(|&(tick, _)| o + Duration::from_millis(tick));
        assert_eq!(next, expect);
    }
}
