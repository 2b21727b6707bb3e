//! Numbers on the command line. clap's own parser answers `supervisor run abc` with the integer
//! parser's "invalid digit found in string"; this one names the argument and what it takes.

use std::ffi::OsStr;
use std::str::FromStr;

use clap::builder::TypedValueParser;
use clap::error::{Error, ErrorKind};
use clap::{Arg, Command};

/// What a port argument takes.
pub(super) const PORT: &str = "a port number, 0 to 65535";
/// What an `--attempt` takes.
pub(super) const ATTEMPT: &str = "an attempt number";

/// The parser of every numeric argument: `what` is what the argument takes ("an issue number"),
/// `min` the least value accepted.
#[derive(Debug, Clone)]
pub(super) struct Number<T> {
    what: &'static str,
    min: Option<T>,
}

/// A number argument that takes `what`.
pub(super) fn number<T>(what: &'static str) -> Number<T> {
    Number { what, min: None }
}

impl<T> Number<T> {
    /// Refuse values below `min` (`what` should say so).
    pub(super) fn at_least(self, min: T) -> Self {
        Number {
            min: Some(min),
            ..self
        }
    }
}

impl<T> TypedValueParser for Number<T>
where
    T: FromStr + PartialOrd + Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<T, Error> {
        let text = value.to_string_lossy();
        match text.parse::<T>() {
            Ok(n) if self.min.as_ref().is_none_or(|min| n >= *min) => Ok(n),
            _ => Err(Error::raw(
                ErrorKind::ValueValidation,
                format!("{} must be {}, got `{text}`\n", name(arg), self.what),
            )
            .with_cmd(cmd)),
        }
    }
}

/// `--port` for an option, `ISSUE` for a positional argument.
fn name(arg: Option<&Arg>) -> String {
    let Some(arg) = arg else {
        return "the value".into();
    };
    if let Some(long) = arg.get_long() {
        return format!("--{long}");
    }
    match arg.get_value_names().and_then(|names| names.first()) {
        Some(name) => name.to_string(),
        None => arg.get_id().as_str().to_uppercase(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::number;

    #[derive(Debug, Parser)]
    struct Args {
        #[arg(value_parser = number::<u64>("an issue number"))]
        issue: u64,
        #[arg(long, value_parser = number::<u16>("a port number, 0 to 65535"))]
        port: Option<u16>,
        #[arg(long, value_parser = number::<u64>("a number of runs, 1 or more").at_least(1))]
        runs: Option<u64>,
    }

    fn error(args: &[&str]) -> String {
        let e = Args::try_parse_from(args).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
        e.to_string()
    }

    #[test]
    fn a_bad_number_names_the_argument_and_what_it_takes() {
        assert!(error(&["x", "abc"]).contains("ISSUE must be an issue number, got `abc`"));
        let e = error(&["x", "1", "--port", "70000"]);
        assert!(
            e.contains("--port must be a port number, 0 to 65535, got `70000`"),
            "{e}"
        );
        let e = error(&["x", "1", "--runs", "0"]);
        assert!(
            e.contains("--runs must be a number of runs, 1 or more, got `0`"),
            "{e}"
        );
        let ok =
            <Args as Parser>::try_parse_from(["x", "42", "--port", "0", "--runs", "2"]).unwrap();
        assert_eq!((ok.issue, ok.port, ok.runs), (42, Some(0), Some(2)));
    }
}
