//! Hidden markers that make comment writes idempotent.
//!
//! Every comment supervisor posts carries `<!-- supervisor:run=… stage=… attempt=… kind=… -->`. A
//! resumed run reuses its run id, so a marker equal in all four fields means "already posted".
//! Values are percent-encoded so they can hold spaces and never end the HTML comment early.

use std::fmt;
use std::sync::OnceLock;

use regex::Regex;

use super::types::Comment;

/// The kind of the tracking comment's marker: one comment per issue, edited as runs move (a live
/// view, never context for an agent).
pub const TRACKING_KIND: &str = "tracking";

/// Identifies one write of one run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Marker {
    pub run: String,
    pub stage: String,
    pub attempt: u32,
    /// What the comment is: `stage`, `gates`, `score`, `summary`, `close`, …
    pub kind: String,
}

impl Marker {
    pub fn new(
        run: impl Into<String>,
        stage: impl Into<String>,
        attempt: u32,
        kind: impl Into<String>,
    ) -> Marker {
        Marker {
            run: run.into(),
            stage: stage.into(),
            attempt,
            kind: kind.into(),
        }
    }

    /// The marker of `run`'s tracking comment.
    pub fn tracking(run: &str) -> Marker {
        Marker::new(run, "run", 0, TRACKING_KIND)
    }

    /// The hidden HTML comment.
    pub fn render(&self) -> String {
        format!(
            "<!-- supervisor:run={} stage={} attempt={} kind={} -->",
            encode(&self.run),
            encode(&self.stage),
            self.attempt,
            encode(&self.kind)
        )
    }

    /// `body` with the marker on a line of its own at the end (replacing any marker it had).
    pub fn stamp(&self, body: &str) -> String {
        let clean = strip(body);
        let clean = clean.trim_end();
        if clean.is_empty() {
            self.render()
        } else {
            format!("{clean}\n\n{}", self.render())
        }
    }

    /// Every well-formed marker in `body`, in order.
    pub fn parse_all(body: &str) -> Vec<Marker> {
        pattern()
            .captures_iter(body)
            .filter_map(|c| Marker::parse_fields(c.get(1)?.as_str()))
            .collect()
    }

    /// Whether `body` carries this marker.
    pub fn is_in(&self, body: &str) -> bool {
        Marker::parse_all(body).iter().any(|m| m == self)
    }

    /// The first comment carrying this marker.
    pub fn find_in<'c>(&self, comments: &'c [Comment]) -> Option<&'c Comment> {
        comments.iter().find(|c| self.is_in(&c.body))
    }

    fn parse_fields(fields: &str) -> Option<Marker> {
        let (mut run, mut stage, mut attempt, mut kind) = (None, None, None, None);
        for pair in fields.split_whitespace() {
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            let v = decode(v)?;
            match k {
                "run" => run = Some(v),
                "stage" => stage = Some(v),
                "attempt" => attempt = v.parse().ok(),
                "kind" => kind = Some(v),
                _ => {}
            }
        }
        Some(Marker {
            run: run?,
            stage: stage?,
            attempt: attempt?,
            kind: kind?,
        })
    }
}

impl fmt::Display for Marker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"<!--\s*supervisor:([^>]*?)\s*-->").expect("the marker pattern is valid")
    })
}

/// `body` without supervisor markers.
fn strip(body: &str) -> String {
    pattern().replace_all(body, "").into_owned()
}

/// Bytes a marker value keeps as they are; `-` is kept too, except after another `-`.
const MARKER_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'_')
    .remove(b':')
    .remove(b'+')
    .remove(b'/')
    .remove(b'@')
    .remove(b'-');

/// Percent-encode a marker value. A `-` following a `-` is encoded too, so that a value never holds
/// `--`, which would end the HTML comment early.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, run) in s.split("--").enumerate() {
        if i > 0 {
            out.push_str("-%2D");
        }
        out.extend(percent_encoding::utf8_percent_encode(run, MARKER_VALUE));
    }
    // `---…`: each further dash of a run follows a dash as well.
    while out.contains("%2D-") {
        out = out.replace("%2D-", "%2D%2D");
    }
    out
}

/// A percent-encoded marker value; `None` for a malformed escape or bytes that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let malformed = bytes.iter().enumerate().any(|(i, b)| {
        *b == b'%'
            && !s
                .get(i + 1..i + 3)
                .is_some_and(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
    });
    if malformed {
        return None;
    }
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn renders_and_parses() {
        let m = Marker::new("20261101-abc", "Test Design", 2, "stage");
        let text = m.render();
        assert_eq!(
            text,
            "<!-- supervisor:run=20261101-abc stage=Test%20Design attempt=2 kind=stage -->"
        );
        assert_eq!(Marker::parse_all(&text), vec![m.clone()]);
        let body = m.stamp("## Research Findings\n\nsome text\n");
        assert!(body.starts_with("## Research Findings"));
        assert!(m.is_in(&body));
        // Stamping again does not add a second marker.
        assert_eq!(Marker::parse_all(&m.stamp(&body)).len(), 1);
    }

    #[test]
    fn all_four_fields_must_match() {
        let m = Marker::new("r1", "Audit", 1, "stage");
        let body = m.stamp("x");
        assert!(!Marker::new("r1", "Audit", 2, "stage").is_in(&body));
        assert!(!Marker::new("r2", "Audit", 1, "stage").is_in(&body));
        assert!(!Marker::new("r1", "Audit", 1, "score").is_in(&body));
        assert!(!Marker::new("r1", "Research", 1, "stage").is_in(&body));
    }

    #[test]
    fn ignores_malformed_markers() {
        assert!(Marker::parse_all("<!-- supervisor:run=x stage=y -->").is_empty());
        assert!(Marker::parse_all("<!-- supervisor:run=x stage=y attempt=z kind=k -->").is_empty());
        assert!(
            Marker::parse_all("<!-- supervisor:run=%ZZ stage=y attempt=1 kind=k -->").is_empty()
        );
        assert_eq!(
            Marker::parse_all("a <!--supervisor:run=x stage=y attempt=1 kind=k extra=1--> b").len(),
            1
        );
    }

    #[test]
    fn encoding_is_stable() {
        // Markers already on GitHub must still be found: the format never changes.
        for (raw, encoded) in [
            ("a--b", "a-%2Db"),
            ("x---y", "x-%2D%2Dy"),
            ("x-->", "x-%2D%3E"),
            ("Test Design", "Test%20Design"),
            ("é/ok@1.2_a:b+c", "%C3%A9/ok@1.2_a:b+c"),
            ("-", "-"),
            ("----", "-%2D%2D%2D"),
        ] {
            assert_eq!(encode(raw), encoded, "{raw}");
            assert_eq!(decode(encoded).as_deref(), Some(raw));
        }
        assert_eq!(decode("%ZZ"), None);
        assert_eq!(decode("%4"), None);
        assert_eq!(decode("%FF"), None);
    }

    #[test]
    fn dashes_never_close_the_comment() {
        let m = Marker::new("a--b", "x-->", 1, "k");
        let text = m.render();
        assert!(!text[4..text.len() - 3].contains("--"), "{text}");
        assert_eq!(Marker::parse_all(&text), vec![m]);
    }

    proptest! {
        #[test]
        fn round_trip(run in ".{0,20}", stage in ".{0,20}", attempt in 0u32..1000, kind in "[a-z]{1,8}") {
            prop_assume!(!run.is_empty() && !stage.is_empty());
            let m = Marker::new(run, stage, attempt, kind);
            prop_assert_eq!(Marker::parse_all(&m.stamp("body")), vec![m]);
        }

        #[test]
        fn parsing_never_panics(s in ".{0,200}") {
            let _ = Marker::parse_all(&s);
        }
    }
}
