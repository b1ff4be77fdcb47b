//! Command-line flags in the style of the gRPC interop programs: `--name=value`,
//! `--name value`, one or two dashes.

use std::collections::HashMap;

/// The flags given, by name; `Err` names a malformed or unknown one.
pub fn parse(
    args: impl IntoIterator<Item = String>,
    known: &[&str],
) -> Result<HashMap<String, String>, String> {
    let mut flags = HashMap::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name.to_string(), value.to_string()),
            None => {
                let value = args.next().ok_or_else(|| format!("flag --{flag} needs a value"))?;
                (flag.to_string(), value)
            }
        };
        if !known.contains(&name.as_str()) {
            return Err(format!("unknown flag --{name} (known: {})", known.join(", ")));
        }
        flags.insert(name, value);
    }
    Ok(flags)
}
