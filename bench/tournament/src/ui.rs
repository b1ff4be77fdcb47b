//! Progress display: one indicatif bar per suite on stderr, plus log lines.
//!
//! When stderr is not a terminal (CI, tests) indicatif draws nothing, and log lines go to
//! stderr as plain text so that a CI log still tells what happened. [`Ui::hidden`] prints
//! nothing at all.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::suites::Suite;

/// The progress bar and log of a tournament.
pub struct Ui {
    bar: Mutex<Option<ProgressBar>>,
    quiet: bool,
}

impl Ui {
    /// A display on stderr.
    pub fn stderr() -> Ui {
        Ui { bar: Mutex::new(None), quiet: false }
    }

    /// A display that shows and logs nothing.
    pub fn hidden() -> Ui {
        Ui { bar: Mutex::new(None), quiet: true }
    }

    fn with_bar(&self, f: impl FnOnce(&ProgressBar)) {
        let guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = guard.as_ref() {
            f(bar);
        }
    }

    /// Prints a log line above the bar.
    pub fn log(&self, line: &str) {
        if self.quiet {
            return;
        }
        let guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(bar) if !bar.is_hidden() => bar.println(line),
            _ => eprintln!("{line}"),
        }
    }

    /// Shows a spinner with `message` while setup work runs.
    pub fn busy(&self, message: &str) {
        if self.quiet {
            return;
        }
        let mut guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = guard.take() {
            old.finish_and_clear();
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar.set_message(message.to_string());
        *guard = Some(bar);
    }

    /// Starts the bar of a suite with `total` runs.
    pub fn start_suite(&self, suite: Suite, total: u64) {
        if self.quiet {
            return;
        }
        let mut guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = guard.take() {
            old.finish_and_clear();
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{prefix:>7} [{bar:30}] {pos}/{len} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(suite.name());
        bar.enable_steady_tick(Duration::from_millis(500));
        *guard = Some(bar);
    }

    /// Moves the bar to the next run and names it ("fibers · tokio · run 2 of 5").
    pub fn step(&self, message: &str) {
        self.with_bar(|bar| {
            bar.set_message(message.to_string());
            bar.inc(1);
        });
    }

    /// Clears the bar at the end of a suite.
    pub fn finish_suite(&self) {
        let mut guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = guard.take() {
            bar.finish_and_clear();
        }
    }
}
