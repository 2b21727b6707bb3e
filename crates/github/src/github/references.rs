//! "Depends on #N" / "Blocked by #N" in an issue body.
//!
//! Markdown-aware: references inside fenced code blocks and inline code are examples, not
//! dependencies. Accepted forms: `Depends on #12`, `depends on: #12, #13 and #14`, `Blocked by #7`,
//! and the same with `owner/repo#N` or a full issue URL of the same repository.

use std::sync::OnceLock;

use regex::Regex;

use crate::config::RepoSlug;

/// Issue numbers of `repo` that `body` says this issue depends on, in order, without repeats.
pub fn body_blockers(body: &str, repo: &RepoSlug) -> Vec<u64> {
    static HEAD: OnceLock<Regex> = OnceLock::new();
    static ITEM: OnceLock<Regex> = OnceLock::new();
    let head = HEAD.get_or_init(|| {
        Regex::new(r"(?i)\b(?:depends\s+on|blocked\s+by)\b[\s:]*").expect("valid pattern")
    });
    // One reference and what separates it from the next.
    let item = ITEM.get_or_init(|| {
        Regex::new(
            r"(?i)^(?:#(\d+)|([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)#(\d+)|https?://[^\s/]+/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/(?:issues|pull)/(\d+))(?:\s*(?:,|and|&)\s*|\s+)?",
        )
        .expect("valid pattern")
    });
    let mut found = Vec::new();
    for line in prose_lines(body) {
        for m in head.find_iter(&line) {
            let mut rest = &line[m.end()..];
            while let Some(c) = item.captures(rest) {
                let same_repo = |o: usize, r: usize| {
                    c.get(o).zip(c.get(r)).is_some_and(|(o, r)| {
                        o.as_str().eq_ignore_ascii_case(&repo.owner)
                            && r.as_str().eq_ignore_ascii_case(&repo.name)
                    })
                };
                let number = if let Some(n) = c.get(1) {
                    Some(n.as_str())
                } else if c.get(4).is_some() {
                    same_repo(2, 3)
                        .then(|| c.get(4).map(|n| n.as_str()))
                        .flatten()
                } else {
                    same_repo(5, 6)
                        .then(|| c.get(7).map(|n| n.as_str()))
                        .flatten()
                };
                if let Some(n) = number.and_then(|n| n.parse::<u64>().ok()) {
                    if n > 0 && !found.contains(&n) {
                        found.push(n);
                    }
                }
                let consumed = c.get(0).map_or(0, |m| m.end());
                if consumed == 0 {
                    break;
                }
                rest = &rest[consumed..];
            }
        }
    }
    found
}

/// Lines of `body` outside fenced code blocks, with inline code spans blanked.
fn prose_lines(body: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for line in body.lines() {
        let trimmed = line.trim_start();
        let run = |ch: char| trimmed.chars().take_while(|&c| c == ch).count();
        match fence {
            Some((ch, len)) => {
                if run(ch) >= len && trimmed.trim_start_matches(ch).trim().is_empty() {
                    fence = None;
                }
            }
            None => {
                let (b, t) = (run('`'), run('~'));
                if b >= 3 {
                    fence = Some(('`', b));
                } else if t >= 3 {
                    fence = Some(('~', t));
                } else {
                    lines.push(blank_inline_code(line));
                }
            }
        }
    }
    lines
}

fn blank_inline_code(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let delim = &rest[start..start + ticks];
        let after = &rest[start + ticks..];
        match after.find(delim) {
            Some(end) => {
                out.push_str(&rest[..start]);
                out.push(' ');
                rest = &after[end + ticks..];
            }
            None => {
                out.push_str(&rest[..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn repo() -> RepoSlug {
        RepoSlug::parse("acme/widgets").unwrap()
    }

    #[test]
    fn finds_references() {
        let cases: &[(&str, &[u64])] = &[
            ("Depends on #12", &[12]),
            ("depends on: #12, #13 and #14.", &[12, 13, 14]),
            ("Blocked by #7\nBLOCKED BY #7", &[7]),
            ("blocked by acme/widgets#3 and other/repo#4", &[3]),
            (
                "Depends on https://github.com/acme/widgets/issues/21",
                &[21],
            ),
            ("Depends on https://github.com/other/x/issues/21", &[]),
            ("see #5; this depends on nothing", &[]),
            ("Depends on #0", &[]),
            ("Fixes #9", &[]),
            ("independs on #3", &[]),
        ];
        for (body, want) in cases {
            assert_eq!(body_blockers(body, &repo()), *want, "{body}");
        }
    }

    #[test]
    fn ignores_code() {
        let body = "Intro\n```\nDepends on #1\n```\nUse `Blocked by #2` to declare.\n~~~md\nblocked by #3\n~~~\nDepends on #4";
        assert_eq!(body_blockers(body, &repo()), vec![4]);
    }

    proptest! {
        #[test]
        fn never_panics(s in "(?s).{0,300}") {
            let _ = body_blockers(&s, &repo());
        }

        #[test]
        fn never_panics_on_near_misses(s in "(Depends on|Blocked by|`|#|,| and |[0-9]|\n|```){0,40}") {
            let _ = body_blockers(&s, &repo());
        }
    }
}
