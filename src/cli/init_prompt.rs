//! The questions `supervisor init` asks on a terminal for what its flags leave open: plain lines
//! on stdin, the question and its default on stderr. An empty answer takes the default.

use std::io::{BufRead, Write};

/// Where answers come from and questions go.
pub(super) struct Prompt {
    input: Box<dyn BufRead>,
    output: Box<dyn Write>,
}

/// What to do about the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BoardChoice {
    Create,
    Existing(u64),
    /// Leave the board as the settings have it (none yet: set it later).
    Skip,
}

impl BoardChoice {
    /// `create`/`c`, a board number (`7` or `#7`), or `skip`/`s`.
    pub(super) fn parse(answer: &str) -> Option<BoardChoice> {
        match answer.trim().to_ascii_lowercase().as_str() {
            "c" | "create" => Some(BoardChoice::Create),
            "s" | "skip" => Some(BoardChoice::Skip),
            other => other
                .trim_start_matches('#')
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .map(BoardChoice::Existing),
        }
    }
}

impl Prompt {
    pub(super) fn new(input: Box<dyn BufRead>, output: Box<dyn Write>) -> Prompt {
        Prompt { input, output }
    }

    /// The process's stdin and stderr.
    pub(super) fn terminal() -> Prompt {
        Prompt::new(
            Box::new(std::io::BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        )
    }

    /// Ask `question` until `read` accepts the answer (an empty one is `default`; with no
    /// default an answer is needed).
    pub(super) fn ask<T>(
        &mut self,
        question: &str,
        default: &str,
        read: impl Fn(&str) -> Option<T>,
    ) -> Result<T, String> {
        loop {
            let _ = match default {
                "" => write!(self.output, "{question}: "),
                _ => write!(self.output, "{question} [{default}]: "),
            };
            let _ = self.output.flush();
            let mut line = String::new();
            match self.input.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    return Err(format!(
                        "no answer to \"{question}\" (input ended); answer it, or give it as a flag (--help lists them)"
                    ));
                }
                Ok(_) => {}
            }
            let answer = match line.trim() {
                "" => default,
                given => given,
            };
            match read(answer) {
                Some(value) => return Ok(value),
                None if answer.is_empty() => {
                    let _ = writeln!(self.output, "  an answer is needed");
                }
                None => {
                    let _ = writeln!(self.output, "  `{answer}` is not one of the answers");
                }
            }
        }
    }

    /// A yes/no question.
    pub(super) fn confirm(&mut self, question: &str, default: bool) -> Result<bool, String> {
        let default = if default { "y" } else { "n" };
        self.ask(question, default, |a| {
            match a.to_ascii_lowercase().as_str() {
                "y" | "yes" => Some(true),
                "n" | "no" => Some(false),
                _ => None,
            }
        })
    }

    /// Comma-separated GitHub logins (at least one).
    pub(super) fn logins(&mut self, question: &str, default: &str) -> Result<Vec<String>, String> {
        self.ask(question, default, |a| {
            let logins: Vec<String> = a
                .split([',', ' '])
                .map(|l| l.trim().trim_start_matches('@'))
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            let valid = |l: &String| {
                l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') && !l.starts_with('-')
            };
            (!logins.is_empty() && logins.iter().all(valid)).then_some(logins)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(input: &str) -> (Prompt, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
        #[derive(Clone)]
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Shared(Default::default());
        let seen = out.0.clone();
        let input = std::io::Cursor::new(input.as_bytes().to_vec());
        (Prompt::new(Box::new(input), Box::new(out)), seen)
    }

    #[test]
    fn empty_answers_take_the_default_and_wrong_ones_are_asked_again() {
        let (mut p, seen) = prompt("\nmaybe\nYes\n@bob, carol\n");
        assert_eq!(p.confirm("Install?", false), Ok(false));
        assert_eq!(p.confirm("Copy?", false), Ok(true));
        assert_eq!(
            p.logins("Codeowners", "alice"),
            Ok(vec!["bob".to_string(), "carol".to_string()])
        );
        let seen = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
        assert!(seen.contains("Install? [n]: "), "{seen}");
        assert!(seen.contains("`maybe` is not one of the answers"), "{seen}");
    }

    #[test]
    fn the_default_login_is_offered_and_bad_logins_refused() {
        let (mut p, _) = prompt("\n");
        assert_eq!(
            p.logins("Codeowners", "alice"),
            Ok(vec!["alice".to_string()])
        );
        let (mut p, _) = prompt("not/a login\n");
        let err = p.logins("Codeowners", "alice").unwrap_err();
        assert!(
            err.contains("input ended") && err.contains("Codeowners"),
            "{err}"
        );
    }

    #[test]
    fn board_answers() {
        assert_eq!(BoardChoice::parse("create"), Some(BoardChoice::Create));
        assert_eq!(BoardChoice::parse("C"), Some(BoardChoice::Create));
        assert_eq!(BoardChoice::parse("#7"), Some(BoardChoice::Existing(7)));
        assert_eq!(BoardChoice::parse("12"), Some(BoardChoice::Existing(12)));
        assert_eq!(BoardChoice::parse("skip"), Some(BoardChoice::Skip));
        assert_eq!(BoardChoice::parse("0"), None);
        assert_eq!(BoardChoice::parse("board"), None);
    }
}
