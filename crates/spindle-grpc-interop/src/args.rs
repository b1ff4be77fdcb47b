//! Command-line flags in the style of the gRPC interop programs: `--name=value`,
//! `--name value`, one or two dashes; a flag followed by another flag (or by nothing) is a
//! boolean switched on (`--use_tls --ca_file x`), as Go's `flag` package reads it.

use std::collections::HashMap;

/// The flags given, by name; `Err` names a malformed or unknown one.
pub fn parse(
    args: impl IntoIterator<Item = String>,
    known: &[&str],
) -> Result<HashMap<String, String>, String> {
    let mut flags = HashMap::new();
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name.to_string(), value.to_string()),
            None => match args.next_if(|next| !next.starts_with('-')) {
                Some(value) => (flag.to_string(), value),
                None => (flag.to_string(), "true".to_string()),
            },
        };
        if !known.contains(&name.as_str()) {
            return Err(format!("unknown flag --{name} (known: {})", known.join(", ")));
        }
        flags.insert(name, value);
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn values_and_boolean_switches() {
        let known = ["use_tls", "ca_file", "port", "test_case", "verbose"];
        let flags = parse(
            args(&["--use_tls", "--ca_file", "ca.pem", "--port=3", "-test_case", "all", "--verbose"]),
            &known,
        )
        .unwrap();
        assert_eq!(flags["use_tls"], "true");
        assert_eq!(flags["ca_file"], "ca.pem");
        assert_eq!(flags["port"], "3");
        assert_eq!(flags["test_case"], "all");
        assert_eq!(flags["verbose"], "true");
        assert_eq!(parse(args(&["--use_tls=false"]), &known).unwrap()["use_tls"], "false");
    }

    #[test]
    fn unknown_flags_and_bare_arguments_are_errors() {
        let err = parse(args(&["--nope", "1"]), &["port"]).unwrap_err();
        assert!(err.contains("unknown flag --nope"), "{err}");
        let err = parse(args(&["stray"]), &["port"]).unwrap_err();
        assert!(err.contains("unexpected argument"), "{err}");
    }
}
