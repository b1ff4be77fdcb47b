//! Measurement harnesses for spindle (see `perf/README.md`): each binary in `src/bin/` is a
//! program that a script in this directory drives to measure one property, written up in
//! `docs/perf/`. Not part of spindle's API.
