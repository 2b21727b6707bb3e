//! Problems found while loading configuration: each names the file, the field and the fix.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem with a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// 1-based column (in characters) of the key or item on that line, when known.
    pub column: Option<u32>,
    /// Dotted path of the offending field (`supervisor.repo`, `stages[3].markerMap.X`).
    pub field: String,
    pub problem: String,
    /// What the user should do about it.
    pub fix: String,
}

impl ConfigIssue {
    pub fn new(
        file: &Path,
        field: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        ConfigIssue {
            file: file.to_path_buf(),
            line: None,
            column: None,
            field: field.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    pub fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = line.and_then(|l| u32::try_from(l).ok());
        self
    }

    /// At a line and column, when known.
    pub(crate) fn at(mut self, position: Option<(usize, usize)>) -> Self {
        self.line = position.and_then(|(line, _)| u32::try_from(line).ok());
        self.column = position.and_then(|(_, column)| u32::try_from(column).ok());
        self
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": `{}`: {}", self.field, self.problem)?;
        if !self.fix.is_empty() {
            write!(f, " — {}", self.fix)?;
        }
        Ok(())
    }
}

/// Every error found, reported together so a user fixes them in one pass, with the warnings found
/// on the way (an unknown key is often the reason for an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub issues: Vec<ConfigIssue>,
    pub warnings: Vec<ConfigIssue>,
}

impl ConfigError {
    pub fn one(issue: ConfigIssue) -> Self {
        ConfigError::new(vec![issue])
    }

    pub fn new(issues: Vec<ConfigIssue>) -> Self {
        ConfigError {
            issues,
            warnings: Vec::new(),
        }
    }

    /// Ok when `issues` is empty.
    pub fn check(issues: Vec<ConfigIssue>) -> Result<(), ConfigError> {
        if issues.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::new(issues))
        }
    }

    /// The same errors, with `warnings` shown beside them.
    pub fn with_warnings(mut self, warnings: Vec<ConfigIssue>) -> Self {
        self.warnings.extend(warnings);
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let n = self.issues.len();
        writeln!(f, "{n} configuration error{}:", plural(n))?;
        for issue in &self.issues {
            writeln!(f, "  {issue}")?;
        }
        let n = self.warnings.len();
        if n > 0 {
            writeln!(f, "{n} warning{}:", plural(n))?;
            for issue in &self.warnings {
                writeln!(f, "  {issue}")?;
            }
        }
        Ok(())
    }
}

/// The known name closest to `unknown`, ignoring case: at most 3 edits (insertions, deletions,
/// substitutions, adjacent transpositions) and fewer than half its length.
pub fn did_you_mean<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = unknown.to_lowercase();
    known
        .iter()
        .map(|k| (strsim::osa_distance(&lower, &k.to_lowercase()), *k))
        .filter(|(d, k)| *d <= 3 && *d * 2 < k.len().max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let known = ["codeowners", "projectNumber", "repo"];
        assert_eq!(did_you_mean("codeowner", &known), Some("codeowners"));
        assert_eq!(did_you_mean("projectnumber", &known), Some("projectNumber"));
        assert_eq!(did_you_mean("rpeo", &known), Some("repo"));
        assert_eq!(did_you_mean("somethingElse", &known), None);
        assert_eq!(
            did_you_mean("passGithubToken", &["passGitHubToken"]),
            Some("passGitHubToken")
        );
        assert_eq!(did_you_mean("x", &["y"]), None);
    }

    #[test]
    fn display_names_file_line_field_and_fix() {
        let issue = ConfigIssue::new(
            Path::new(".pi/settings.json"),
            "supervisor.repo",
            "is missing",
            "add \"repo\": \"owner/name\"",
        )
        .at_line(Some(3));
        assert_eq!(
            issue.to_string(),
            ".pi/settings.json:3: `supervisor.repo`: is missing — add \"repo\": \"owner/name\""
        );
    }
}
