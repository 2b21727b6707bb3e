//! The part of npm's semver ranges the package-safety gate needs to know which version `npm install`
//! picks: exact versions, `^`, `~`, `x`/`*` wildcards and partial versions, `>= <= > < =`, hyphen
//! ranges and `||`. Anything else (dist-tags, URLs, `workspace:`…) is refused with a reason.

use std::cmp::Ordering;
use std::fmt;

/// A prerelease identifier: numeric ones sort below alphanumeric ones.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pre {
    Num(u64),
    Alpha(String),
}

impl Ord for Pre {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Pre::Num(a), Pre::Num(b)) => a.cmp(b),
            (Pre::Num(_), Pre::Alpha(_)) => Ordering::Less,
            (Pre::Alpha(_), Pre::Num(_)) => Ordering::Greater,
            (Pre::Alpha(a), Pre::Alpha(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Pre {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A semantic version (build metadata is dropped: it does not order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pre: Vec<Pre>,
}

impl Version {
    pub fn new(major: u64, minor: u64, patch: u64) -> Version {
        Version {
            major,
            minor,
            patch,
            pre: Vec::new(),
        }
    }

    /// `1.2.3`, `v1.2.3`, `=1.2.3`, `1.2.3-beta.1+build`.
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.trim().trim_start_matches('=').trim_start_matches('v');
        let s = s.split('+').next()?;
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (s, None),
        };
        let mut parts = core.split('.');
        let major = parse_num(parts.next()?)?;
        let minor = parse_num(parts.next()?)?;
        let patch = parse_num(parts.next()?)?;
        if parts.next().is_some() {
            return None;
        }
        let pre = match pre {
            None => Vec::new(),
            Some(p) => parse_pre(p)?,
        };
        Some(Version {
            major,
            minor,
            patch,
            pre,
        })
    }

    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }

    fn triple(&self) -> (u64, u64, u64) {
        (self.major, self.minor, self.patch)
    }

    /// The lowest version of a release line: `x.y.z-0`.
    fn floor(major: u64, minor: u64, patch: u64) -> Version {
        Version {
            major,
            minor,
            patch,
            pre: vec![Pre::Num(0)],
        }
    }
}

fn parse_num(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

fn parse_pre(p: &str) -> Option<Vec<Pre>> {
    p.split('.')
        .map(|id| {
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                None
            } else if id.bytes().all(|b| b.is_ascii_digit()) {
                id.parse().ok().map(Pre::Num)
            } else {
                Some(Pre::Alpha(id.to_string()))
            }
        })
        .collect()
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.triple().cmp(&other.triple()).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            }
        })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, p) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match p {
                Pre::Num(n) => write!(f, "{n}")?,
                Pre::Alpha(s) => f.write_str(s)?,
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Version,
}

impl Comparator {
    fn matches(&self, v: &Version) -> bool {
        let ord = v.cmp(&self.version);
        match self.op {
            Op::Eq => ord == Ordering::Equal,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
        }
    }
}

/// An npm version range: alternatives (`||`) of comparator sets (all must hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    sets: Vec<Vec<Comparator>>,
}

/// A partial version: `1`, `1.2`, `1.2.3-beta`, with `x`/`X`/`*` for missing parts.
#[derive(Debug, Clone)]
struct Partial {
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Vec<Pre>,
}

impl Partial {
    fn parse(s: &str) -> Result<Partial, String> {
        let s = s.trim().trim_start_matches('v');
        let s = s.split('+').next().unwrap_or_default();
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (s, None),
        };
        let wild = |p: &str| matches!(p, "x" | "X" | "*");
        let mut nums = [None; 3];
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return Err(format!("`{s}` is not a version"));
        }
        for (i, p) in parts.iter().enumerate() {
            if wild(p) {
                break;
            }
            nums[i] = Some(parse_num(p).ok_or_else(|| format!("`{s}` is not a version"))?);
        }
        let pre = match pre {
            Some(p) if nums[2].is_some() => {
                parse_pre(p).ok_or_else(|| format!("`{s}` has an invalid prerelease"))?
            }
            Some(_) => return Err(format!("`{s}` has a prerelease on a partial version")),
            None => Vec::new(),
        };
        Ok(Partial {
            major: nums[0],
            minor: nums[1].filter(|_| nums[0].is_some()),
            patch: nums[2].filter(|_| nums[1].is_some() && nums[0].is_some()),
            pre,
        })
    }

    fn lower(&self) -> Version {
        Version {
            major: self.major.unwrap_or(0),
            minor: self.minor.unwrap_or(0),
            patch: self.patch.unwrap_or(0),
            pre: self.pre.clone(),
        }
    }

    /// Exclusive upper bound of the versions this partial covers (None when it covers everything).
    fn upper_exclusive(&self) -> Option<Version> {
        match (self.major, self.minor, self.patch) {
            (None, _, _) => None,
            (Some(m), None, _) => Some(Version::floor(m + 1, 0, 0)),
            (Some(m), Some(n), None) => Some(Version::floor(m, n + 1, 0)),
            (Some(_), Some(_), Some(_)) => None,
        }
    }

    fn is_full(&self) -> bool {
        self.patch.is_some()
    }
}

fn cmp(op: Op, version: Version) -> Comparator {
    Comparator { op, version }
}

impl Range {
    /// Parse an npm range. Errors say what is not supported.
    pub fn parse(input: &str) -> Result<Range, String> {
        let mut sets = Vec::new();
        for alt in input.split("||") {
            sets.push(parse_set(alt)?);
        }
        Ok(Range { sets })
    }

    /// Whether `v` satisfies the range (prereleases only when a comparator of the same set names a
    /// prerelease of the same major.minor.patch, as npm does).
    pub fn satisfies(&self, v: &Version) -> bool {
        self.sets.iter().any(|set| {
            set.iter().all(|c| c.matches(v))
                && (!v.is_prerelease()
                    || set
                        .iter()
                        .any(|c| c.version.is_prerelease() && c.version.triple() == v.triple()))
        })
    }

    /// The highest of `versions` satisfying the range.
    pub fn max_satisfying<'a>(
        &self,
        versions: impl IntoIterator<Item = &'a Version>,
    ) -> Option<&'a Version> {
        versions.into_iter().filter(|v| self.satisfies(v)).max()
    }
}

fn parse_set(text: &str) -> Result<Vec<Comparator>, String> {
    let text = text.trim();
    if text.is_empty() || matches!(text, "*" | "x" | "X") {
        return Ok(vec![cmp(Op::Ge, Version::floor(0, 0, 0))]);
    }
    // Hyphen range: `A - B`.
    if let Some((a, b)) = text.split_once(" - ") {
        let lo = Partial::parse(a)?;
        let hi = Partial::parse(b)?;
        let mut set = vec![cmp(Op::Ge, lo.lower())];
        if hi.is_full() {
            set.push(cmp(Op::Le, hi.lower()));
        } else if let Some(up) = hi.upper_exclusive() {
            set.push(cmp(Op::Lt, up));
        }
        return Ok(set);
    }
    // Glue operators to their versions: `>= 1.2` → `>=1.2`.
    let mut glued = String::new();
    let mut pending_op = false;
    for token in text.split_whitespace() {
        if !glued.is_empty() && !pending_op {
            glued.push(' ');
        }
        glued.push_str(token);
        pending_op = matches!(token, ">=" | "<=" | ">" | "<" | "=" | "~" | "^");
    }
    let mut set = Vec::new();
    for token in glued.split_whitespace() {
        set.extend(parse_comparator(token)?);
    }
    Ok(set)
}

fn parse_comparator(token: &str) -> Result<Vec<Comparator>, String> {
    let (op, rest) = ["~>", ">=", "<=", ">", "<", "=", "~", "^"]
        .iter()
        .find_map(|op| token.strip_prefix(op).map(|r| (*op, r)))
        .unwrap_or(("", token));
    if rest.is_empty() {
        return Err(format!("`{token}` has no version"));
    }
    if !rest.starts_with(|c: char| c.is_ascii_digit() || matches!(c, 'x' | 'X' | '*' | 'v')) {
        return Err(format!(
            "`{token}` is not a version range (dist-tags, URLs and protocols are not supported)"
        ));
    }
    let p = Partial::parse(rest)?;
    let lower = p.lower();
    Ok(match op {
        "" | "=" => match p.upper_exclusive() {
            _ if p.major.is_none() => vec![cmp(Op::Ge, Version::floor(0, 0, 0))],
            Some(up) => vec![cmp(Op::Ge, lower), cmp(Op::Lt, up)],
            None => vec![cmp(Op::Eq, lower)],
        },
        "~" | "~>" => match (p.major, p.minor) {
            (None, _) => vec![cmp(Op::Ge, Version::floor(0, 0, 0))],
            (Some(m), None) => vec![cmp(Op::Ge, lower), cmp(Op::Lt, Version::floor(m + 1, 0, 0))],
            (Some(m), Some(n)) => {
                vec![cmp(Op::Ge, lower), cmp(Op::Lt, Version::floor(m, n + 1, 0))]
            }
        },
        "^" => match (p.major, p.minor, p.patch) {
            (None, _, _) => vec![cmp(Op::Ge, Version::floor(0, 0, 0))],
            (Some(m), _, _) if m > 0 => {
                vec![cmp(Op::Ge, lower), cmp(Op::Lt, Version::floor(m + 1, 0, 0))]
            }
            (Some(0), None, _) => vec![cmp(Op::Ge, lower), cmp(Op::Lt, Version::floor(1, 0, 0))],
            (Some(0), Some(n), _) if n > 0 => {
                vec![cmp(Op::Ge, lower), cmp(Op::Lt, Version::floor(0, n + 1, 0))]
            }
            (Some(0), Some(0), None) => {
                vec![cmp(Op::Ge, lower), cmp(Op::Lt, Version::floor(0, 1, 0))]
            }
            (Some(0), Some(0), Some(pt)) => {
                vec![
                    cmp(Op::Ge, lower),
                    cmp(Op::Lt, Version::floor(0, 0, pt + 1)),
                ]
            }
            _ => vec![cmp(Op::Ge, lower)],
        },
        ">=" => match p.major {
            None => vec![cmp(Op::Ge, Version::floor(0, 0, 0))],
            Some(_) => vec![cmp(Op::Ge, lower)],
        },
        ">" => match (p.major, p.minor, p.patch) {
            // `>*` matches nothing.
            (None, _, _) => vec![cmp(Op::Lt, Version::floor(0, 0, 0))],
            (Some(m), None, _) => vec![cmp(Op::Ge, Version::new(m + 1, 0, 0))],
            (Some(m), Some(n), None) => vec![cmp(Op::Ge, Version::new(m, n + 1, 0))],
            _ => vec![cmp(Op::Gt, lower)],
        },
        "<" => match p.major {
            None => vec![cmp(Op::Lt, Version::floor(0, 0, 0))],
            Some(_) if p.is_full() => vec![cmp(Op::Lt, lower)],
            Some(m) => vec![cmp(Op::Lt, Version::floor(m, p.minor.unwrap_or(0), 0))],
        },
        "<=" => match p.upper_exclusive() {
            _ if p.major.is_none() => vec![cmp(Op::Ge, Version::floor(0, 0, 0))],
            Some(up) => vec![cmp(Op::Lt, up)],
            None => vec![cmp(Op::Le, lower)],
        },
        _ => return Err(format!("`{token}` uses an unsupported operator")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn sat(range: &str, version: &str) -> bool {
        Range::parse(range).unwrap().satisfies(&v(version))
    }

    #[test]
    fn version_order() {
        assert!(v("1.0.0-alpha") < v("1.0.0-alpha.1"));
        assert!(v("1.0.0-alpha.1") < v("1.0.0-alpha.beta"));
        assert!(v("1.0.0-beta.2") < v("1.0.0-beta.11"));
        assert!(v("1.0.0-rc.1") < v("1.0.0"));
        assert!(v("1.10.0") > v("1.9.9"));
        assert_eq!(v("v1.2.3+build.5").to_string(), "1.2.3");
        assert_eq!(Version::parse("1.2"), None);
        assert_eq!(Version::parse("01.2.3"), None);
    }

    #[test]
    fn npm_range_table() {
        let table: &[(&str, &str, bool)] = &[
            ("1.2.3", "1.2.3", true),
            ("1.2.3", "1.2.4", false),
            ("=1.2.3", "1.2.3", true),
            ("^1.2.3", "1.9.0", true),
            ("^1.2.3", "2.0.0", false),
            ("^1.2.3", "1.2.2", false),
            ("^0.2.3", "0.2.9", true),
            ("^0.2.3", "0.3.0", false),
            ("^0.0.3", "0.0.3", true),
            ("^0.0.3", "0.0.4", false),
            ("^1.2", "1.5.0", true),
            ("^0.0", "0.0.9", true),
            ("^0.0", "0.1.0", false),
            ("^1.x", "1.0.0", true),
            ("~1.2.3", "1.2.9", true),
            ("~1.2.3", "1.3.0", false),
            ("~1.2", "1.2.0", true),
            ("~1", "1.9.9", true),
            ("~1", "2.0.0", false),
            ("1.x", "1.4.0", true),
            ("1.2.x", "1.3.0", false),
            ("1", "1.0.1", true),
            ("*", "3.0.0", true),
            ("", "0.0.1", true),
            (">=1.2.3", "1.2.3", true),
            (">=1.2.3", "1.2.2", false),
            (">1.2.3", "1.2.3", false),
            (">1.2", "1.2.9", false),
            (">1.2", "1.3.0", true),
            ("<1.2.3", "1.2.2", true),
            ("<1.2", "1.1.9", true),
            ("<1.2", "1.2.0", false),
            ("<=1.2", "1.2.9", true),
            ("<=1.2", "1.3.0", false),
            (">= 1.0.0 < 2", "1.5.0", true),
            (">=1.0.0 <2.0.0", "2.0.0", false),
            ("1.2.3 - 2.3.4", "2.3.4", true),
            ("1.2.3 - 2.3.4", "2.3.5", false),
            ("1.2 - 2.3", "2.3.9", true),
            ("1.2 - 2.3", "2.4.0", false),
            ("1.2.3 - 2", "2.9.9", true),
            ("^1.0.0 || ^3.0.0", "3.1.0", true),
            ("^1.0.0 || ^3.0.0", "2.1.0", false),
            // Prereleases only where the range names one of the same release.
            ("^1.2.3", "1.3.0-beta.1", false),
            ("^1.2.3-beta.1", "1.2.3-beta.2", true),
            ("^1.2.3-beta.1", "1.2.4-beta.1", false),
            ("*", "1.0.0-rc.1", false),
        ];
        for (range, version, expected) in table {
            assert_eq!(sat(range, version), *expected, "{range} ∋ {version}");
        }
    }

    #[test]
    fn unsupported_ranges_are_refused() {
        for bad in [
            "latest",
            "next",
            "file:../x",
            "github:a/b",
            "workspace:*",
            "^",
            ">=abc",
        ] {
            assert!(Range::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn max_satisfying_picks_the_highest_release() {
        let versions: Vec<Version> = ["1.0.0", "1.2.0", "1.10.1", "2.0.0", "1.11.0-beta.1"]
            .iter()
            .map(|s| v(s))
            .collect();
        let r = Range::parse("^1.0.0").unwrap();
        assert_eq!(r.max_satisfying(&versions), Some(&v("1.10.1")));
        assert_eq!(Range::parse("^3").unwrap().max_satisfying(&versions), None);
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(s in "\\PC*") {
            if let Ok(r) = Range::parse(&s) {
                let _ = r.satisfies(&Version::new(1, 2, 3));
            }
            let _ = Version::parse(&s);
        }
    }
}
