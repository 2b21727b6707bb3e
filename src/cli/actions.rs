//! `supervisor run` inside GitHub Actions: the job summary, the step outputs and the annotations.
//!
//! While a run is under way its log may hold text from outside (an issue title, a tool's output);
//! with annotations on, workflow commands are switched off (`::stop-commands::`) until the run is
//! over, so such text cannot pose as a command. Then commands are switched back on and the
//! annotations follow. Every text written here has the run's tokens blanked out.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::output::errln;
use crate::pipeline::RunSummary;
use crate::report;

/// Where the Actions outputs of one run go; all off outside GitHub Actions unless asked for.
#[derive(Debug, Default)]
pub(super) struct ActionsOutput {
    step_summary: Option<PathBuf>,
    github_output: Option<PathBuf>,
    /// The token that switches workflow commands back on; `Some` when annotations are printed.
    resume: Option<String>,
    secrets: Vec<String>,
}

impl ActionsOutput {
    /// From the flags, else the runner's environment (`GITHUB_STEP_SUMMARY`, `GITHUB_OUTPUT`,
    /// `GITHUB_ACTIONS=true` for annotations).
    pub(super) fn new(
        step_summary: Option<PathBuf>,
        github_output: Option<PathBuf>,
        annotations: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> ActionsOutput {
        let path_of = |var: &str| env(var).filter(|v| !v.trim().is_empty()).map(PathBuf::from);
        let annotations = annotations || env("GITHUB_ACTIONS").is_some_and(|v| v == "true");
        let mut secrets = Vec::new();
        for var in ["GH_TOKEN", "GITHUB_TOKEN"] {
            if let Some(v) = env(var) {
                add_secret(&mut secrets, &v);
            }
        }
        ActionsOutput {
            step_summary: step_summary.or_else(|| path_of("GITHUB_STEP_SUMMARY")),
            github_output: github_output.or_else(|| path_of("GITHUB_OUTPUT")),
            resume: annotations.then(|| {
                format!(
                    "supervisor-{:016x}{:016x}",
                    fastrand::u64(..),
                    fastrand::u64(..)
                )
            }),
            secrets,
        }
    }

    /// A token the run uses: blanked out of everything written here.
    pub(super) fn add_secret(&mut self, secret: &str) {
        add_secret(&mut self.secrets, secret);
    }

    /// Before the run: switch workflow commands off in the log (on stderr, the stream the run's
    /// human output uses, so the order holds).
    pub(super) fn begin(&self) {
        if let Some(token) = &self.resume {
            errln!("::stop-commands::{token}");
        }
    }

    /// After a run with a summary (printed already): job summary, outputs, annotations.
    pub(super) fn finished(&self, summary: &RunSummary) {
        self.write_summary(&report::job_summary(summary));
        self.write_outputs(&report::action_outputs(summary));
        self.annotate(&report::annotations(summary));
    }

    /// After a run that could not start or failed before it had a summary.
    pub(super) fn failed(&self, issue: u64, message: &str) {
        self.write_summary(&report::error_job_summary(issue, message));
        self.write_outputs(&report::error_outputs(message));
        let line = format!(
            "::error title={}::{}",
            report::escape_property("supervisor"),
            report::escape_data(message.trim())
        );
        self.annotate(&[line]);
    }

    fn annotate(&self, lines: &[String]) {
        let Some(token) = &self.resume else {
            return;
        };
        errln!("::{token}::");
        for l in lines {
            errln!("{}", self.redact(l));
        }
    }

    fn write_summary(&self, markdown: &str) {
        if let Some(path) = &self.step_summary {
            append(path, &self.redact(markdown), "the job summary");
        }
    }

    fn write_outputs(&self, outputs: &[(&str, String)]) {
        let Some(path) = &self.github_output else {
            return;
        };
        let outputs: Vec<(&str, String)> =
            outputs.iter().map(|(k, v)| (*k, self.redact(v))).collect();
        let delimiter = loop {
            let d = format!("ghadelimiter_{:016x}", fastrand::u64(..));
            if report::delimiter_fits(&outputs, &d) {
                break d;
            }
        };
        append(
            path,
            &report::github_output(&outputs, &delimiter),
            "the step outputs",
        );
    }

    fn redact(&self, text: &str) -> String {
        self.secrets
            .iter()
            .fold(text.to_string(), |t, s| t.replace(s.as_str(), "***"))
    }
}

fn add_secret(secrets: &mut Vec<String>, secret: &str) {
    let s = secret.trim();
    // Short values would blank out ordinary words; tokens are long.
    if s.len() >= 8 && !secrets.iter().any(|x| x == s) {
        secrets.push(s.to_string());
    }
}

fn append(path: &Path, text: &str, what: &str) {
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        errln!(
            "supervisor run: cannot write {what} to {}: {}; check the path (GITHUB_STEP_SUMMARY / GITHUB_OUTPUT or the flag)",
            path.display(),
            crate::config::io_reason(&e)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let vars: std::collections::BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.get(k).cloned()
    }

    #[test]
    fn the_runner_environment_turns_everything_on() {
        let env = env_of(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_STEP_SUMMARY", "/tmp/s"),
            ("GITHUB_OUTPUT", "/tmp/o"),
            ("GH_TOKEN", "ghp_0123456789"),
        ]);
        let a = ActionsOutput::new(None, None, false, &env);
        assert_eq!(a.step_summary.as_deref(), Some(Path::new("/tmp/s")));
        assert_eq!(a.github_output.as_deref(), Some(Path::new("/tmp/o")));
        assert!(a.resume.as_deref().is_some_and(|t| t.len() > 20));
        assert_eq!(a.redact("token ghp_0123456789 here"), "token *** here");

        let off = ActionsOutput::new(None, None, false, &env_of(&[("GITHUB_STEP_SUMMARY", " ")]));
        assert!(off.step_summary.is_none() && off.github_output.is_none() && off.resume.is_none());
        let flags = ActionsOutput::new(Some("s.md".into()), None, true, &env_of(&[]));
        assert_eq!(flags.step_summary.as_deref(), Some(Path::new("s.md")));
        assert!(flags.resume.is_some());
    }

    #[test]
    fn outputs_are_appended_with_tokens_blanked() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::write(&out, "earlier=1\n").unwrap();
        let mut a = ActionsOutput::new(None, Some(out.clone()), false, &env_of(&[]));
        a.add_secret("ghs_abcdefgh12345");
        a.add_secret("short");
        a.failed(7, "bad credentials ghs_abcdefgh12345\nsecond line");
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.starts_with("earlier=1\nend<<ghadelimiter_"), "{text}");
        assert!(!text.contains("ghs_abcdefgh12345") && text.contains("bad credentials ***"));
        assert_eq!(a.redact("short"), "short");
    }
}
