//! Any agent CLI, from a command template in the settings' `backends`.
//!
//! `{prompt}`, `{system_prompt}`, `{model}` and `{role}` are substituted in every argument. The prompt
//! goes on stdin (`promptVia: "stdin"`) or where `{prompt}` stands (`"arg"`). When the template does not
//! use `{system_prompt}`, the prompt carries the system prompt before the task, so the role is never
//! lost. The answer is the command's stdout (its last MiB); it reports no tool calls or tokens.

use super::{AgentCli, Invocation, Launch, combined_prompt};
use crate::agent::stream::{StreamParser, Tail, Tally};
use crate::config::{CommandBackend, PromptVia};

/// How much of a command's stdout is kept as its answer.
pub(crate) const COMMAND_OUTPUT_CAP: usize = 1024 * 1024;

impl AgentCli for CommandBackend {
    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let separate_system = self.command.iter().any(|a| a.contains("{system_prompt}"));
        let prompt = if separate_system {
            inv.task.to_string()
        } else {
            combined_prompt(inv.system_prompt, inv.task)
        };
        let via_arg = self.prompt_via == PromptVia::Arg;
        let subst = |arg: &str| -> String {
            // One pass, so text substituted in is never substituted again.
            let mut out = String::with_capacity(arg.len());
            let mut rest = arg;
            while let Some(i) = rest.find('{') {
                out.push_str(&rest[..i]);
                let tail = &rest[i..];
                let (value, len) = if tail.starts_with("{prompt}") {
                    (Some(if via_arg { prompt.as_str() } else { "" }), 8)
                } else if tail.starts_with("{system_prompt}") {
                    (Some(inv.system_prompt), 15)
                } else if tail.starts_with("{model}") {
                    (Some(inv.role.model.as_deref().unwrap_or("")), 7)
                } else if tail.starts_with("{role}") {
                    (Some(inv.role.name.as_str()), 6)
                } else {
                    (None, 1)
                };
                match value {
                    Some(v) => out.push_str(v),
                    None => out.push('{'),
                }
                rest = &tail[len..];
            }
            out.push_str(rest);
            out
        };
        let mut args: Vec<String> = self.command.iter().map(|a| subst(a)).collect();
        let program = if args.is_empty() {
            String::new()
        } else {
            args.remove(0)
        };
        if via_arg && !self.command.iter().any(|a| a.contains("{prompt}")) {
            args.push(prompt.clone());
        }
        Launch {
            program: program.into(),
            args,
            stdin: (!via_arg).then_some(prompt),
            env: Vec::new(),
            model: inv.role.model.clone(),
        }
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CommandStream::new(COMMAND_OUTPUT_CAP))
    }
}

/// Keeps the tail of a plain-text stdout as the answer.
#[derive(Debug)]
pub struct CommandStream {
    tail: Tail,
}

impl CommandStream {
    pub fn new(cap: usize) -> CommandStream {
        CommandStream {
            tail: Tail::new(cap),
        }
    }
}

impl StreamParser for CommandStream {
    fn line(&mut self, line: &str, _tally: &mut Tally) {
        self.tail.push_line(line);
    }

    fn end(&mut self, tally: &mut Tally, _success: bool) {
        let text = self.tail.text().trim_end().to_string();
        tally.saw_text(&text);
        tally.final_text = Some(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentDefinition;

    fn role() -> AgentDefinition {
        let text = "---\nmodel: m1\n---\nBe careful.\n";
        AgentDefinition::parse(std::path::Path::new("x.md"), "developer", text)
            .unwrap()
            .0
    }

    fn launch(command: &[&str], via: PromptVia, task: &str) -> Launch {
        let cb = CommandBackend {
            command: command.iter().map(|s| s.to_string()).collect(),
            prompt_via: via,
        };
        let role = role();
        cb.launch(&Invocation {
            role: &role,
            system_prompt: "SYS {prompt}",
            task,
            attempt: 1,
            revision: false,
            subject: None,
            env: &[],
        })
    }

    #[test]
    fn substitutes_once_and_puts_the_prompt_where_asked() {
        let l = launch(
            &[
                "aider",
                "--model",
                "{model}",
                "--message",
                "{prompt}",
                "{x}",
            ],
            PromptVia::Arg,
            "fix {role}",
        );
        assert_eq!(l.program, std::path::Path::new("aider"));
        assert_eq!(l.args[..2], ["--model", "m1"]);
        assert!(l.args[3].starts_with("SYS {prompt}") && l.args[3].ends_with("fix {role}"));
        assert_eq!(l.args[4], "{x}");
        assert_eq!(l.stdin, None);

        let l = launch(
            &["agent", "--system", "{system_prompt}", "--as", "{role}"],
            PromptVia::Stdin,
            "task",
        );
        assert_eq!(l.args, ["--system", "SYS {prompt}", "--as", "developer"]);
        assert_eq!(l.stdin.as_deref(), Some("task"));

        let l = launch(&["agent"], PromptVia::Arg, "task");
        assert_eq!(l.args.len(), 1);
        assert!(l.args[0].ends_with("task"));
    }
}
