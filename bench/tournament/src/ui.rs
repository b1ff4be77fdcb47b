//! Progress display: one indicatif bar per suite on stderr, plus log lines.
//!
//! On a terminal, setup work shows as a spinner and the runs of a suite as a bar. When stderr
//! is not a terminal (CI, a log file) indicatif would draw nothing, so every setup step and
//! every run is printed as a plain line instead (`[3/14] tcp · node · run 1 of 3`), and a CI
//! log still tells what happened and where the time went. [`Ui::hidden`] prints nothing.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::suites::Suite;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// indicatif on a terminal.
    Bar,
    /// One line per step on stderr.
    Plain,
    /// Nothing.
    Hidden,
}

/// The progress bar and log of a tournament.
pub struct Ui {
    bar: Mutex<Option<ProgressBar>>,
    /// Plain mode's position and length within the current suite.
    count: Mutex<(u64, u64)>,
    mode: Mode,
}

impl Ui {
    /// A display on stderr: a bar on a terminal, plain lines otherwise.
    pub fn stderr() -> Ui {
        let mode = if std::io::stderr().is_terminal() { Mode::Bar } else { Mode::Plain };
        Ui { bar: Mutex::new(None), count: Mutex::new((0, 0)), mode }
    }

    /// A display that shows and logs nothing.
    pub fn hidden() -> Ui {
        Ui { bar: Mutex::new(None), count: Mutex::new((0, 0)), mode: Mode::Hidden }
    }

    fn with_bar(&self, f: impl FnOnce(&ProgressBar)) {
        let guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = guard.as_ref() {
            f(bar);
        }
    }

    /// Prints a log line above the bar.
    pub fn log(&self, line: &str) {
        if self.mode == Mode::Hidden {
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
        match self.mode {
            Mode::Hidden => return,
            Mode::Plain => {
                eprintln!("{message}");
                return;
            }
            Mode::Bar => {}
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
        match self.mode {
            Mode::Hidden => return,
            Mode::Plain => {
                *self.count.lock().unwrap_or_else(|e| e.into_inner()) = (0, total);
                eprintln!("{suite}: {total} runs");
                return;
            }
            Mode::Bar => {}
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

    /// Names the run that starts now ("fibers · tokio · run 2 of 5").
    pub fn step(&self, message: &str) {
        match self.mode {
            Mode::Hidden => {}
            Mode::Plain => {
                let (done, total) = *self.count.lock().unwrap_or_else(|e| e.into_inner());
                eprintln!("[{}/{total}] {message}", done + 1);
            }
            Mode::Bar => self.with_bar(|bar| bar.set_message(message.to_string())),
        }
    }

    /// Counts the run named by the last [`Ui::step`] as done (or skipped).
    pub fn advance(&self) {
        match self.mode {
            Mode::Hidden => {}
            Mode::Plain => self.count.lock().unwrap_or_else(|e| e.into_inner()).0 += 1,
            Mode::Bar => self.with_bar(|bar| bar.inc(1)),
        }
    }

    /// Clears the bar at the end of a suite.
    pub fn finish_suite(&self) {
        let mut guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = guard.take() {
            bar.finish_and_clear();
        }
    }
}
