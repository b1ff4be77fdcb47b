//! Thread-local context that belongs to a fiber rather than to its worker: tracing's current
//! span (feature `tracing`).
//!
//! A library that keeps context per thread (tracing's current span, a logger's scope, a
//! tokio `EnterGuard`) sees one thread where a worker runs many fibers in turn: a span entered
//! by one fiber would still be entered when the next one runs, and that fiber's events would
//! be logged inside it. spindle moves tracing's context with the fiber. The general rule for
//! other thread-local context is in the crate docs ("Thread-local context in fibers").
//!
//! # How
//!
//! A subscriber that tracks the current span (tracing-subscriber's `Registry`, under `fmt`
//! and most layers) keeps a stack of entered spans per thread. Every context switch on a
//! worker goes through two points (module `sched::worker::switch`): the context that leaves
//! calls [`suspend`] just before the switch, which exits every span on the thread's stack,
//! top first, and returns their ids; the same context calls [`resume`] with them right after
//! the switch brings it back, which enters them again, bottom first. The ids live in the
//! leaving context's own frame (a fiber's stack, or the scheduler context's), so a fiber
//! costs no memory for it, and no allocation for up to four spans. A fiber
//! therefore sees only the spans it entered itself, on top of an empty stack; the scheduler
//! context (task polls, `Instrumented` futures) likewise keeps its own. A layer's
//! `on_enter`/`on_exit` thus see a fiber's span exited while the fiber is parked, as tokio's
//! `Instrumented` exits a task's span between polls, so busy times are the fiber's own.
//!
//! # Invariants
//!
//! - **A worker's span stack is the running context's.** Between a `resume` and the next
//!   `suspend` of the same context, the spans on the thread's stack are that context's:
//!   every switch away suspends (empties the stack) and every switch back resumes. A fiber
//!   that finishes suspends and drops what it left (a leaked `Entered` guard), so nothing
//!   outlives it on the thread.
//! - **Same dispatcher.** Ids are entered again through the dispatcher that exited them (kept
//!   with the ids): a scoped default changed meanwhile cannot receive another subscriber's ids.
//! - **Bounded.** At most [`MAX_SPANS`] spans are moved per switch, so a subscriber whose
//!   `exit` does not pop its current span cannot loop a switch forever.
//! - **Cheap when off.** Without the feature both functions are empty and inlined. With it but
//!   no subscriber ever set, each is one relaxed load (`dispatcher::has_been_set`).
//!
//! A fiber also inherits its spawner's current span (module `fiber::spawn`): the span is kept
//! in the fiber's header and entered around its body, as `Instrument::in_current_span` does
//! for a future; `fiber::Builder::instrument` gives another one.

/// What [`suspend`] took off the thread: the ids to enter again, and through which dispatcher.
#[cfg(feature = "tracing")]
#[must_use = "a suspended context is resumed when its owner runs again"]
pub(crate) struct Suspended(Option<Saved>);

#[cfg(feature = "tracing")]
pub(crate) struct Saved {
    dispatch: tracing::Dispatch,
    /// Top of the stack first: the first [`INLINE`] in place (no allocation for the usual
    /// one or two spans), the rest in `more`.
    inline: [Option<tracing::span::Id>; INLINE],
    more: Vec<tracing::span::Id>,
}

/// Span ids kept without an allocation per switch.
#[cfg(feature = "tracing")]
const INLINE: usize = 4;

/// Nothing to save without the feature.
#[cfg(not(feature = "tracing"))]
#[must_use]
pub(crate) struct Suspended;

/// The most spans moved at one switch ("bounded").
#[cfg(feature = "tracing")]
pub(crate) const MAX_SPANS: usize = 64;

/// Takes the running context's spans off the thread (see the module doc): called just before
/// it switches away.
#[cfg(feature = "tracing")]
#[inline]
pub(crate) fn suspend() -> Suspended {
    if !tracing::dispatcher::has_been_set() {
        return Suspended(None);
    }
    suspend_spans()
}

#[cfg(feature = "tracing")]
#[inline(never)]
fn suspend_spans() -> Suspended {
    tracing::dispatcher::get_default(|dispatch| {
        let Some(top) = dispatch.current_span().id().cloned() else { return Suspended(None) };
        let mut saved = Saved { dispatch: dispatch.clone(), inline: Default::default(), more: Vec::new() };
        let mut next = Some(top);
        let mut count = 0;
        while let Some(id) = next {
            dispatch.exit(&id);
            match saved.inline.get_mut(count) {
                Some(slot) => *slot = Some(id),
                None => saved.more.push(id),
            }
            count += 1;
            if count == MAX_SPANS {
                break;
            }
            next = dispatch.current_span().id().cloned();
        }
        Suspended(Some(saved))
    })
}

/// Puts back what [`suspend`] took: called by the same context right after the switch that
/// brings it back.
#[cfg(feature = "tracing")]
#[inline]
pub(crate) fn resume(suspended: Suspended) {
    if let Some(saved) = suspended.0 {
        resume_spans(saved);
    }
}

#[cfg(feature = "tracing")]
#[inline(never)]
fn resume_spans(saved: Saved) {
    // Bottom first: the deepest ones are at the end of `more`, then of `inline`.
    for id in saved.more.iter().rev().chain(saved.inline.iter().rev().flatten()) {
        saved.dispatch.enter(id);
    }
}

/// Without the feature: nothing.
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn suspend() -> Suspended {
    Suspended
}

/// Without the feature: nothing.
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn resume(_: Suspended) {}

/// A finishing fiber's last act: whatever it left entered (a leaked guard) is exited, so
/// it does not leak into the next context ("a worker's span stack is the running context's").
#[inline(always)]
pub(crate) fn discard() {
    #[cfg(feature = "tracing")]
    drop(suspend());
}

/// The span a new fiber carries when its builder names none: the spawner's current span, if
/// a subscriber is set and the spawner is inside one.
#[cfg(feature = "tracing")]
#[inline]
pub(crate) fn spawner_span() -> Option<Box<tracing::Span>> {
    if !tracing::dispatcher::has_been_set() {
        return None;
    }
    current_span()
}

#[cfg(feature = "tracing")]
#[inline(never)]
fn current_span() -> Option<Box<tracing::Span>> {
    let span = tracing::Span::current();
    (!span.is_none()).then(|| Box::new(span))
}
