//! Problems found while loading configuration: each names the file, the field and the fix.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem with a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
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
            field: field.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    pub fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": `{}`: {}", self.field, self.problem)?;
        if !self.fix.is_empty() {
            write!(f, " — {}", self.fix)?;
        }
        Ok(())
    }
}

/// Every error found, reported together so a user fixes them in one pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub issues: Vec<ConfigIssue>,
}

impl ConfigError {
    pub fn one(issue: ConfigIssue) -> Self {
        ConfigError {
            issues: vec![issue],
        }
    }

    /// Ok when `issues` is empty.
    pub fn check(issues: Vec<ConfigIssue>) -> Result<(), ConfigError> {
        if issues.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { issues })
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.issues.len();
        writeln!(
            f,
            "{n} configuration error{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for issue in &self.issues {
            writeln!(f, "  {issue}")?;
        }
        Ok(())
    }
}

/// 1-based line of the first occurrence of `"key"` as an object key in JSON text.
/// Good enough to point a user at the right line; `None` when not found.
pub fn json_key_line(text: &str, key: &str) -> Option<usize> {
    let needle = format!("\"{key}\"");
    let mut search_from = 0;
    while let Some(pos) = text[search_from..].find(&needle) {
        let at = search_from + pos;
        let rest = text[at + needle.len()..].trim_start();
        if rest.starts_with(':') {
            return Some(text[..at].matches('\n').count() + 1);
        }
        search_from = at + needle.len();
    }
    None
}

/// The known name closest to `unknown` (Levenshtein distance ≤ 3 and below half its length).
pub fn did_you_mean<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = unknown.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, k)| *d <= 3 && *d * 2 < k.len().max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and adjacent transpositions.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
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
    }

    #[test]
    fn finds_key_lines() {
        let text = "{\n  \"a\": 1,\n  \"note\": \"repo\",\n  \"repo\": \"x\"\n}";
        assert_eq!(json_key_line(text, "repo"), Some(4));
        assert_eq!(json_key_line(text, "a"), Some(2));
        assert_eq!(json_key_line(text, "missing"), None);
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
