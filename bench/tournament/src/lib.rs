//! The spindle tournament: builds and runs benchmark programs for spindle and its peers
//! (Go, Ruby, Crystal, Python, Node, tokio, C) side by side on this machine, and writes
//! `results.jsonl`, `REPORT.md` and SVG charts.
//!
//! How the pieces fit, in the order data flows:
//!
//! - [`cli`]: flags → [`Config`];
//! - [`manifest`]: `bench/peers/<lang>/<suite>.peer.toml` → [`manifest::Manifest`];
//! - [`setup`]: tools (apt), setup, build and version of each manifest;
//! - [`mod@run`]: warm-up and interleaved runs of a suite ([`proc`] for processes, [`record`] for
//!   the JSON-line protocol, [`http`] + [`wrk`] + [`procfs`] for the http suite, [`blocking`]
//!   for the servers of the blocking suite; [`interrupt`] stops what was started on Ctrl-C);
//! - [`aggregate`]: runs → median/min/max rows with each run's value, the `results.jsonl` schema;
//! - [`model`]: the report's data ([`model::Entry`], [`model::SuiteReport`], [`model::View`], …);
//! - [`report`], [`tables`], [`summary`], [`charts`], [`machine`]: the report;
//! - [`driver`]: all of the above, suite by suite.
//!
//! The schema (suites, cases, metrics, expected competitors) lives in [`suites`].
//!
//! Imports among the report's modules go one way, with no cycle: `driver` → `report`,
//! `charts`; `report` → `tables`, `summary`; and all five → [`model`], which imports none
//! of them (check: `grep -n 'use crate::' src/{model,driver,report,charts,summary,tables}.rs`).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks, missing_docs)]

pub mod aggregate;
pub mod blocking;
pub mod charts;
pub mod cli;
pub mod driver;
pub mod h2load;
pub mod http;
pub mod interrupt;
pub mod machine;
pub mod manifest;
pub mod markdown;
pub mod model;
pub mod proc;
pub mod procfs;
pub mod record;
pub mod report;
pub mod run;
pub mod setup;
pub mod suites;
pub mod summary;
pub mod sys;
pub mod tables;
pub mod ui;
pub mod wrk;

pub use cli::Args;
pub use driver::{run, Config, Outcome};
