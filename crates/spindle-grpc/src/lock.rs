//! Locks that outlive a panic: a caught panic (a handler's, on the thread that held the lock)
//! poisons a `std::sync::Mutex`, and the state behind it stays consistent (each critical
//! section is a few assignments), so every later call takes the lock as if nothing happened.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, poisoned or not (module docs).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
