//! `gates.exclude`: the globs of files the gates leave out. Read here, with the settings, so that the
//! settings' check and the gates accept exactly the same patterns.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// The files `gates.exclude` leaves out of the change: globs as git and most tools read them (`*` and
/// `?` within a path segment, `**` across segments, `{a,b}` alternatives, `[...]` classes), and a
/// pattern ending in `/` for everything below that directory.
#[derive(Debug, Clone)]
pub struct ExcludeGlobs(GlobSet);

/// A `gates.exclude` pattern that is not a glob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("gates.exclude: `{pattern}` {problem}; {EXCLUDE_FIX}")]
pub struct ExcludeError {
    pub(crate) pattern: String,
    /// What is wrong, as the settings' check says it: "is not a valid glob (…)".
    pub(crate) problem: String,
}

/// What to do about a pattern that is not a glob.
pub const EXCLUDE_FIX: &str =
    "correct or remove it in the settings (globs such as \"dist/\" or \"**/*.generated.ts\")";

impl ExcludeGlobs {
    pub fn new(patterns: &[String]) -> Result<ExcludeGlobs, ExcludeError> {
        let mut set = GlobSetBuilder::new();
        for pattern in patterns {
            set.add(Self::glob(pattern)?);
        }
        let set = set.build().map_err(|e| ExcludeError {
            pattern: patterns.join(", "),
            problem: format!("cannot be matched ({e})"),
        })?;
        Ok(ExcludeGlobs(set))
    }

    /// One pattern as a glob; a directory (`dist/`) stands for everything below it.
    pub(crate) fn glob(pattern: &str) -> Result<Glob, ExcludeError> {
        let full = match pattern.strip_suffix('/') {
            Some(dir) => format!("{dir}/**"),
            None => pattern.to_string(),
        };
        GlobBuilder::new(&full)
            .literal_separator(true)
            .build()
            .map_err(|e| ExcludeError {
                pattern: pattern.to_string(),
                problem: format!("is not a valid glob ({})", e.kind()),
            })
    }

    /// Whether `path` (relative to the root, `/`-separated) is excluded.
    pub fn is_match(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

#[cfg(test)]
mod tests {
    use super::ExcludeGlobs;

    fn excludes(pattern: &str, path: &str) -> bool {
        ExcludeGlobs::new(&[pattern.to_string()])
            .unwrap()
            .is_match(path)
    }

    #[test]
    fn globs() {
        let cases = [
            ("src/*.ts", "src/a.ts", true),
            ("src/*.ts", "src/x/a.ts", false),
            ("**/*.generated.ts", "a/b/c.generated.ts", true),
            ("**/*.generated.ts", "c.generated.ts", true),
            ("tests/fixtures/", "tests/fixtures/gates/x.ts", true),
            ("tests/fixtures/", "tests/fixture.ts", false),
            ("vendor/**", "vendor/lib/a.js", true),
            ("a?.py", "ab.py", true),
            ("a?.py", "a/.py", false),
            ("README.md", "README.md", true),
            ("README.md", "docs/README.md", false),
            // Alternatives and classes.
            ("{dist,build}/**", "dist/a.js", true),
            ("{dist,build}/**", "build/x/b.js", true),
            ("{dist,build}/**", "src/dist.js", false),
            ("src/*.{gen,pb}.ts", "src/api.pb.ts", true),
            ("src/*.{gen,pb}.ts", "src/api.ts", false),
            ("src/gen[0-9].ts", "src/gen1.ts", true),
            ("src/gen[0-9].ts", "src/genx.ts", false),
            ("src/[!_]*.ts", "src/_private.ts", false),
            ("src/[!_]*.ts", "src/public.ts", true),
        ];
        for (p, s, want) in cases {
            assert_eq!(excludes(p, s), want, "{p} ~ {s}");
        }
    }

    #[test]
    fn a_pattern_that_is_not_a_glob_is_named() {
        for bad in ["src/[ab.ts", "{dist,build/**", "src/[z-a].ts", "dist}/*.js"] {
            let err = ExcludeGlobs::new(&["dist/".into(), bad.into()]).unwrap_err();
            assert_eq!(err.pattern, bad);
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("gates.exclude: `{bad}` is not a valid glob")),
                "{text}"
            );
            assert!(text.contains("correct or remove it"), "{text}");
        }
    }
}
