//! [`lock`]: std mutexes without poisoning, for spindle's own short critical sections.

/// Locks a std mutex, ignoring poisoning: spindle's primitives keep their state consistent at
/// every unlock, and user code never runs under these locks.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
