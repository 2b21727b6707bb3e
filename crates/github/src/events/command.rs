//! Commands in comments: `/supervisor run`, `/supervisor stop`, `/supervisor status`,
//! `/supervisor epic`, `/supervisor revise <what to change>`.
//!
//! A comment is read as Markdown, as GitHub shows it. A command is a line of a top-level paragraph
//! that starts with the prefix: text in code blocks, inline code, block quotes, lists, headings,
//! links, emphasis or HTML is never a command, so quoting or explaining a command does not run it.

use std::fmt;

use pulldown_cmark::{Event as Md, Options, Parser, Tag, TagEnd};
use serde::Serialize;

/// What a command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// Start (or resume) the pipeline for the issue.
    Run,
    /// Stop the live run of the issue at its next safe point.
    Stop,
    /// Report where the issue's run is.
    Status,
    /// Plan the issue as an epic: split it into sub-issues that the board runs.
    Epic,
    /// Send the work back with these instructions: the rest of the command's line and the lines
    /// that follow it in the same paragraph.
    Revise { note: String },
}

impl Command {
    /// The command's word, as typed after the prefix.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Command::Run => "run",
            Command::Stop => "stop",
            Command::Status => "status",
            Command::Epic => "epic",
            Command::Revise { .. } => "revise",
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The note is someone's free text: say how long it is, not what it says.
            Command::Revise { note } => write!(f, "revise ({} characters)", note.chars().count()),
            other => f.write_str(other.word()),
        }
    }
}

/// A line that starts with the prefix but is not a command supervisor knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum CommandError {
    #[error("the prefix is not followed by a command: use {KNOWN}")]
    Missing,
    #[error("unknown command `{word}`: use {KNOWN}")]
    Unknown { word: String },
    #[error("`{command}` takes no arguments, but `{rest}` follows it")]
    UnexpectedArguments { command: String, rest: String },
    #[error("`revise` needs instructions: write what to change after it")]
    MissingNote,
}

const KNOWN: &str = "run, stop, status, epic or revise <what to change>";

/// Longest piece of someone's text an error repeats.
const QUOTE_CHARS: usize = 40;

/// Most commands taken from one comment; later ones are not read.
pub const MAX_COMMANDS_PER_COMMENT: usize = 10;

/// Most bytes of a comment read for commands. GitHub limits comments to 65,536 characters.
pub const MAX_COMMENT_BYTES: usize = 4 * 65_536;

/// How commands are written: the prefix (`/supervisor`, or a mention such as `@my-bot`), then the
/// command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSyntax {
    prefix: String,
}

/// A prefix that cannot start commands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("command prefix `{prefix}` {problem}: use a word such as \"/supervisor\" or \"@my-bot\"")]
pub struct CommandSyntaxError {
    prefix: String,
    problem: &'static str,
}

impl Default for CommandSyntax {
    fn default() -> Self {
        CommandSyntax {
            prefix: Self::DEFAULT_PREFIX.to_string(),
        }
    }
}

impl CommandSyntax {
    pub(crate) const DEFAULT_PREFIX: &'static str = "/supervisor";

    pub fn new(prefix: &str) -> Result<CommandSyntax, CommandSyntaxError> {
        match crate::config::command_prefix_problem(prefix) {
            Some(problem) => Err(CommandSyntaxError {
                prefix: prefix.chars().take(QUOTE_CHARS).collect(),
                problem,
            }),
            None => Ok(CommandSyntax {
                prefix: prefix.to_string(),
            }),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Every command of a comment, in order (at most [`MAX_COMMANDS_PER_COMMENT`]).
    pub fn parse(&self, comment: &str) -> Vec<Result<Command, CommandError>> {
        let text = &comment[..char_floor(comment, MAX_COMMENT_BYTES)];
        let lines = self.command_lines(text);
        lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                // Revise instructions run to the end of the paragraph or the next command.
                let block_end = match lines.get(i + 1) {
                    Some(next) if next.start < line.paragraph_end => next.start,
                    _ => line.paragraph_end,
                };
                self.parse_command(text, line.start, block_end)
            })
            .collect()
    }

    /// Where the command lines are: their starts and the ends of their paragraphs.
    fn command_lines(&self, text: &str) -> Vec<CommandLine> {
        let mut found = Vec::new();
        // Open tags other than paragraphs: inside any of them, nothing is a command.
        let mut other_tags = 0usize;
        let mut paragraph_end = None;
        let mut line_start = false;
        for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
            let at_line_start = std::mem::replace(&mut line_start, false);
            match event {
                Md::Start(Tag::Paragraph) => {
                    paragraph_end = Some(range.end);
                    line_start = true;
                }
                Md::End(TagEnd::Paragraph) => paragraph_end = None,
                Md::Start(_) => other_tags += 1,
                Md::End(_) => other_tags = other_tags.saturating_sub(1),
                Md::SoftBreak | Md::HardBreak => line_start = true,
                Md::Text(_) if at_line_start && other_tags == 0 => {
                    let Some(end) = paragraph_end else { continue };
                    // Only blanks before it on its source line: `\/supervisor` is not a command.
                    let line_begin = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
                    let blank_before = text[line_begin..range.start].trim().is_empty();
                    if blank_before && self.starts_command(&text[range.start..]) {
                        found.push(CommandLine {
                            start: range.start,
                            paragraph_end: end,
                        });
                        if found.len() == MAX_COMMANDS_PER_COMMENT {
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        found
    }

    /// Whether `text` starts with the prefix as a whole word.
    fn starts_command(&self, text: &str) -> bool {
        let Some(head) = text.get(..self.prefix.len()) else {
            return false;
        };
        head.eq_ignore_ascii_case(&self.prefix)
            && text[self.prefix.len()..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
    }

    /// The command starting at `start` (at the prefix); a revise note may run to `block_end`.
    fn parse_command(
        &self,
        text: &str,
        start: usize,
        block_end: usize,
    ) -> Result<Command, CommandError> {
        let after_prefix = start + self.prefix.len();
        let line_end = text[after_prefix..]
            .find('\n')
            .map_or(text.len(), |i| after_prefix + i);
        let line = &text[after_prefix..line_end];
        let lead = line.len() - line.trim_start().len();
        let rest = trim_line_end(&line[lead..]);
        let word_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, args) = rest.split_at(word_len);
        let args = args.trim_start();
        let no_args = |command: Command| {
            if args.is_empty() {
                Ok(command)
            } else {
                Err(CommandError::UnexpectedArguments {
                    command: command.word().to_string(),
                    rest: quote(args),
                })
            }
        };
        match word.to_ascii_lowercase().as_str() {
            "" => Err(CommandError::Missing),
            "run" => no_args(Command::Run),
            "stop" => no_args(Command::Stop),
            "status" => no_args(Command::Status),
            "epic" => no_args(Command::Epic),
            "revise" => {
                let note_start = after_prefix + lead + word_len;
                let note = text[note_start..block_end.max(note_start)].trim();
                if note.is_empty() {
                    Err(CommandError::MissingNote)
                } else {
                    Ok(Command::Revise {
                        note: note.to_string(),
                    })
                }
            }
            _ => Err(CommandError::Unknown { word: quote(word) }),
        }
    }
}

#[derive(Debug)]
struct CommandLine {
    start: usize,
    paragraph_end: usize,
}

/// A line's end without its Markdown hard-break marks.
fn trim_line_end(s: &str) -> &str {
    s.trim_end().trim_end_matches('\\').trim_end()
}

/// At most [`QUOTE_CHARS`] characters of someone's text, for an error message.
fn quote(s: &str) -> String {
    let mut out: String = s.chars().take(QUOTE_CHARS).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The largest char boundary of `s` at or below `max`.
fn char_floor(s: &str, max: usize) -> usize {
    let mut at = max.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> Vec<Result<Command, CommandError>> {
        CommandSyntax::default().parse(text)
    }

    #[test]
    fn commands_at_the_start_of_a_line() {
        assert_eq!(parse("/supervisor run"), vec![Ok(Command::Run)]);
        assert_eq!(parse("  /supervisor stop  \n"), vec![Ok(Command::Stop)]);
        assert_eq!(parse("/SUPERVISOR Status"), vec![Ok(Command::Status)]);
        assert_eq!(parse("/supervisor epic"), vec![Ok(Command::Epic)]);
        assert_eq!(
            parse("Too big for one pull request.\n/supervisor Epic\n"),
            vec![Ok(Command::Epic)]
        );
        assert_eq!(
            parse("Thanks, looks good.\n/supervisor run\nand more text"),
            vec![Ok(Command::Run)],
            "a line in the middle of a paragraph"
        );
        assert_eq!(
            parse("/supervisor run\r\n\r\n/supervisor status\r\n"),
            vec![Ok(Command::Run), Ok(Command::Status)]
        );
        assert_eq!(
            parse("/supervisor run  \nnext"),
            vec![Ok(Command::Run)],
            "hard break"
        );
        assert_eq!(
            parse("/supervisor run\\\nnext"),
            vec![Ok(Command::Run)],
            "hard break"
        );
    }

    #[test]
    fn a_command_must_start_its_line() {
        for text in [
            "please /supervisor run",
            "/supervisorrun",
            "/supervisor-run",
            "x/supervisor run",
            "\\/supervisor run",
        ] {
            assert_eq!(parse(text), vec![], "{text:?}");
        }
    }

    #[test]
    fn code_quotes_and_formatting_are_not_commands() {
        for text in [
            "```\n/supervisor run\n```",
            "~~~sh\n/supervisor run\n~~~",
            "    /supervisor run",
            "text\n\n    /supervisor run",
            "`/supervisor run`",
            "`/supervisor` run",
            "> /supervisor run",
            "> /supervisor epic",
            "`/supervisor epic`",
            "```\n/supervisor epic\n```",
            "> quoted\n> /supervisor run",
            "- /supervisor run",
            "1. /supervisor run",
            "# /supervisor run",
            "*/supervisor run*",
            "**/supervisor run**",
            "[/supervisor run](https://example.com)",
            "<!--\n/supervisor run\n-->",
            "<div>\n/supervisor run\n</div>",
            // Lazy continuation lines: GitHub shows them inside the quote or the list item.
            "> quoted\n/supervisor run",
            "- item\n/supervisor run",
        ] {
            assert_eq!(parse(text), vec![], "{text:?}");
        }
        // The same commands outside the formatting count.
        assert_eq!(
            parse("```\n/supervisor stop\n```\n\n/supervisor run\n\n> /supervisor stop"),
            vec![Ok(Command::Run)]
        );
        // An unclosed fence runs to the end of the comment.
        assert_eq!(parse("```\n/supervisor run"), vec![]);
    }

    #[test]
    fn unknown_and_malformed_commands_say_so() {
        assert_eq!(
            parse("/supervisor frobnicate"),
            vec![Err(CommandError::Unknown {
                word: "frobnicate".into()
            })]
        );
        assert_eq!(parse("/supervisor"), vec![Err(CommandError::Missing)]);
        assert_eq!(
            parse("/supervisor   \nmore"),
            vec![Err(CommandError::Missing)]
        );
        assert_eq!(
            parse("/supervisor run now please"),
            vec![Err(CommandError::UnexpectedArguments {
                command: "run".into(),
                rest: "now please".into()
            })]
        );
        assert_eq!(
            parse("/supervisor revise"),
            vec![Err(CommandError::MissingNote)]
        );
        assert_eq!(
            parse("/supervisor epic in three parts"),
            vec![Err(CommandError::UnexpectedArguments {
                command: "epic".into(),
                rest: "in three parts".into()
            })]
        );
        assert_eq!(
            parse("/supervisor epics"),
            vec![Err(CommandError::Unknown {
                word: "epics".into()
            })]
        );
        let long = format!("/supervisor {}", "x".repeat(500));
        let found = parse(&long);
        let [Err(CommandError::Unknown { word })] = found.as_slice() else {
            panic!("an unknown command: {found:?}");
        };
        assert_eq!(word.chars().count(), QUOTE_CHARS + 1, "quoted, shortened");
        let message = CommandError::Unknown { word: "x".into() }.to_string();
        assert!(message.contains("unknown command `x`"), "{message}");
        assert!(
            message.contains("run, stop, status, epic or revise"),
            "{message}"
        );
        assert!(
            CommandError::Missing.to_string().contains("epic"),
            "the help lists every command"
        );
    }

    #[test]
    fn revise_takes_the_rest_of_its_paragraph() {
        assert_eq!(
            parse("/supervisor revise rename `foo` to bar\nand add a test.\n\nThanks!"),
            vec![Ok(Command::Revise {
                note: "rename `foo` to bar\nand add a test.".into()
            })]
        );
        assert_eq!(
            parse("/supervisor revise\nUse the builder.\n/supervisor status"),
            vec![
                Ok(Command::Revise {
                    note: "Use the builder.".into()
                }),
                Ok(Command::Status)
            ]
        );
    }

    #[test]
    fn a_configured_mention_works_like_the_prefix() {
        let syntax = CommandSyntax::new("@acme-bot").unwrap();
        assert_eq!(syntax.parse("@acme-bot run"), vec![Ok(Command::Run)]);
        assert_eq!(syntax.parse("@ACME-Bot stop"), vec![Ok(Command::Stop)]);
        assert_eq!(syntax.parse("/supervisor run"), vec![]);
        assert_eq!(syntax.parse("@acme-bots run"), vec![]);
        for bad in ["", "two words", "> quote", "`code`", &"x".repeat(65)] {
            assert!(CommandSyntax::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn commands_per_comment_are_bounded() {
        let text = "/supervisor status\n".repeat(3 * MAX_COMMANDS_PER_COMMENT);
        assert_eq!(parse(&text).len(), MAX_COMMANDS_PER_COMMENT);
        // Past the bytes read, nothing counts.
        let text = format!("{}\n\n/supervisor run", "é".repeat(MAX_COMMENT_BYTES));
        assert_eq!(parse(&text), vec![]);
    }

    /// Fragments that Markdown gives meaning to, to build hostile comments from.
    fn markdownish() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "/supervisor",
            " run",
            " revise",
            " stop",
            " epic",
            "\n",
            "\r\n",
            "```",
            "~~~",
            "`",
            "> ",
            "    ",
            "- ",
            "1. ",
            "# ",
            "*",
            "_",
            "[",
            "](",
            ")",
            "<!--",
            "-->",
            "<div>",
            "\\",
            "é",
            "\u{0}",
            " ",
            "x",
        ]);
        prop::collection::vec(pieces, 0..60).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn no_comment_panics(text in any::<String>()) {
            let found = parse(&text);
            prop_assert!(found.len() <= MAX_COMMANDS_PER_COMMENT);
        }

        #[test]
        fn no_markdown_made_of_command_pieces_panics(text in markdownish()) {
            for result in parse(&text) {
                if let Ok(Command::Revise { note }) = result {
                    prop_assert!(!note.is_empty());
                }
            }
        }

        #[test]
        fn every_known_command_alone_is_found(word in prop::sample::select(vec!["run", "stop", "status", "epic"]), lead in "[ ]{0,3}") {
            let found = parse(&format!("{lead}/supervisor {word}"));
            prop_assert_eq!(found.len(), 1);
            prop_assert_eq!(found[0].as_ref().map(Command::word), Ok(word));
        }
    }
}
