//! Links that leave the worktree. An agent confined to its worktree cannot read a file outside it,
//! but it can commit a symbolic link to one; a gate tool that followed the link would read the file
//! for it and quote it back in findings, comments and the next prompt. So a change that adds such a
//! link is refused before any gate reads it, and what gates report about files outside the worktree
//! is never quoted.

use std::path::{Component, Path, PathBuf};

use super::{ChangeSet, Finding, FindingSeverity};

/// The rule of the finding that names such a link.
pub(crate) const RULE: &str = "link-leaves-worktree";

/// The links among the change's files (as they are in `dir`) that point outside `dir`, directly or
/// through other links, or whose target cannot be placed: one finding each, naming the link, never
/// what it points at.
pub(crate) fn leaving(changes: &ChangeSet, dir: &Path) -> Vec<Finding> {
    let root = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    changes
        .files
        .iter()
        .filter(|f| f.exists())
        .filter(|f| leaves(&root, &f.path))
        .map(|f| Finding {
            file: Some(f.path.clone()),
            line: None,
            rule: RULE.into(),
            message: "is a link to a path outside the worktree; gates do not read a change that \
                      holds one: commit the file itself, or a link within the worktree"
                .into(),
            severity: FindingSeverity::Error,
        })
        .collect()
}

/// Whether `rel` (relative to `root`) is a link, or lies under one, whose target is outside `root`.
fn leaves(root: &Path, rel: &str) -> bool {
    let mut at = root.to_path_buf();
    for part in Path::new(rel).components() {
        let Component::Normal(name) = part else {
            return true;
        };
        at.push(name);
        let Ok(meta) = at.symlink_metadata() else {
            return false;
        };
        if !meta.file_type().is_symlink() {
            continue;
        }
        return match at.canonicalize() {
            Ok(target) => !target.starts_with(root),
            // A dangling link: where it would point, read without the file system.
            Err(_) => std::fs::read_link(&at).map_or(true, |target| {
                !lexically_inside(root, &at.parent().unwrap_or(root).join(target))
            }),
        };
    }
    false
}

/// Whether `path`, with `.` and `..` resolved as written, stays under `root`.
fn lexically_inside(root: &Path, path: &Path) -> bool {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                if !out.pop() {
                    return false;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.starts_with(root)
}

/// A finding about a file outside `dir` (an absolute path elsewhere, or one climbing out with
/// `..`) loses its file and message: tool output about such files is not quoted.
pub(crate) fn confine(finding: &mut Finding, dir: &Path) {
    let Some(file) = &finding.file else {
        return;
    };
    let path = Path::new(file);
    let outside = if path.is_absolute() {
        let root = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        !(path.starts_with(dir) || path.starts_with(&root))
    } else {
        !lexically_inside(Path::new("/w"), &Path::new("/w").join(path))
    };
    if outside {
        finding.file = None;
        finding.line = None;
        finding.message = "(about a file outside the worktree; not shown)".into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::{ChangedFile, FileStatus};

    fn changed(paths: &[&str]) -> ChangeSet {
        ChangeSet {
            files: paths
                .iter()
                .map(|p| ChangedFile {
                    path: p.to_string(),
                    status: FileStatus::Added,
                    additions: 1,
                    deletions: 0,
                })
                .collect(),
            ..ChangeSet::default()
        }
    }

    #[test]
    fn links_out_of_the_worktree_are_named_and_links_within_it_are_not() {
        use std::os::unix::fs::symlink;
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.ts"), "SECRET_MARKER_91\n").unwrap();
        let wt = tempfile::tempdir().unwrap();
        let dir = wt.path();
        std::fs::create_dir_all(dir.join("src/inner")).unwrap();
        std::fs::write(dir.join("src/real.ts"), "export const a = 1;\n").unwrap();
        symlink(outside.path().join("secret.ts"), dir.join("src/config.ts")).unwrap();
        symlink("../../../../../../../etc/passwd", dir.join("src/climb.ts")).unwrap();
        symlink("real.ts", dir.join("src/alias.ts")).unwrap();
        symlink("/nonexistent/elsewhere", dir.join("src/dangling.ts")).unwrap();
        symlink("gone.ts", dir.join("src/dangling-inside.ts")).unwrap();
        symlink(outside.path(), dir.join("src/inner/dir")).unwrap();
        // A link within the worktree to a link that leaves it.
        symlink("config.ts", dir.join("src/chain.ts")).unwrap();
        let changes = changed(&[
            "src/real.ts",
            "src/config.ts",
            "src/climb.ts",
            "src/alias.ts",
            "src/dangling.ts",
            "src/dangling-inside.ts",
            "src/inner/dir/secret.ts",
            "src/chain.ts",
        ]);
        let named: Vec<String> = leaving(&changes, dir)
            .into_iter()
            .map(|f| {
                assert_eq!(f.rule, RULE);
                assert!(
                    !f.message.contains("SECRET")
                        && !f.message.contains(outside.path().to_str().unwrap())
                );
                f.file.unwrap()
            })
            .collect();
        assert_eq!(
            named,
            [
                "src/config.ts",
                "src/climb.ts",
                "src/dangling.ts",
                "src/inner/dir/secret.ts",
                "src/chain.ts"
            ]
        );
    }

    #[test]
    fn findings_about_files_outside_the_worktree_are_not_quoted() {
        let finding = |file: &str| Finding {
            file: Some(file.into()),
            line: Some(3),
            rule: "TS2304".into(),
            message: "Cannot find name 'SECRET_MARKER_91'.".into(),
            severity: FindingSeverity::Error,
        };
        let dir = Path::new("/work/wt");
        for (file, kept) in [
            ("src/a.ts", true),
            ("/work/wt/src/a.ts", true),
            ("/home/u/.ssh/config", false),
            ("../../home/u/secret.ts", false),
            ("src/../../x.ts", false),
        ] {
            let mut f = finding(file);
            confine(&mut f, dir);
            assert_eq!(f.message.contains("SECRET"), kept, "{file}");
            assert_eq!(f.file.is_some(), kept, "{file}");
        }
    }
}
