//! `tournament`: see the crate docs and `bench/tournament/README.md`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = tournament::Args::parse();
    if args.serve_hello {
        return match tournament::blocking::serve_hello() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("tournament --serve-hello: {e}");
                ExitCode::from(2)
            }
        };
    }
    let command = std::iter::once("tournament".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    match args.into_config(command).and_then(|config| tournament::run(&config)) {
        Ok(outcome) => {
            eprintln!("results: {}", outcome.results.display());
            eprintln!("report:  {}", outcome.report.display());
            for failure in &outcome.spindle_failures {
                eprintln!("spindle failed: {failure}");
            }
            ExitCode::from(u8::try_from(outcome.exit_code).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("tournament: {e:#}");
            ExitCode::from(2)
        }
    }
}
