//! Directories named on the command line, checked before anything is done with them.

use std::path::{Path, PathBuf};

use crate::config::directory_problem;

/// `dir`, given with `flag` (`--repo-root`), made canonical; or a sentence naming the argument, what
/// is wrong with it and what to pass instead (`what`: "the repository's directory").
pub(super) fn existing_dir(flag: &str, dir: &Path, what: &str) -> Result<PathBuf, String> {
    match directory_problem(dir) {
        None => Ok(dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())),
        Some(problem) => Err(format!(
            "{flag} {}: {problem}; pass {flag} DIR with {what} (default: the current directory)",
            dir.display()
        )),
    }
}
