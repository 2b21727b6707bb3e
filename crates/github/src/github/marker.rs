//! Hidden markers that make comment writes idempotent.
//!
//! Every comment supervisor posts carries `<!-- supervisor:run=… stage=… attempt=… kind=… -->`. A
//! resumed run reuses its run id, so a marker equal in all four fields means "already posted".
//! Values are percent-encoded so they can hold spaces and never end the HTML comment early.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use regex::Regex;

use super::types::Comment;

/// What a marked comment is: every kind supervisor writes, and the only kinds it reads.
///
/// There is no catch-all variant: a marker whose kind is none of these (written by a later
/// version, or typed by hand) does not parse, so it can never be taken for a known kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MarkerKind {
    /// A stage agent's comment.
    Stage,
    /// The combined note of a gate round that blocked.
    Gates,
    /// An approval whose score missed the threshold.
    ScoreGate,
    /// The run paused (an agent that stalled).
    Paused,
    /// The run stopped; a human is needed.
    Stopped,
    /// The issue was closed as already resolved.
    Resolved,
    /// A revision of a pull request is done.
    Revised,
    /// A pull request ran out of revision rounds.
    RevisionsExhausted,
    /// The reply in the review thread whose top-level comment has this id.
    Thread(u64),
    /// The tracking comment: one per issue, edited as runs move (a live view, never context for
    /// an agent).
    Tracking,
    /// The scheduler's claim on an issue.
    Claim,
    /// The scheduler stopped a run from the board.
    BoardStop,
    /// The scheduler found a run of the issue already going.
    AlreadyRunning,
    /// The scheduler's status comment.
    Status,
    /// The scheduler's answer to a command it could not read: the commands there are.
    CommandHelp,
    /// An epic's plan: its tasks, their sub-issues and the order they run in.
    EpicPlan,
    /// Why an epic's plan was refused.
    EpicRefused,
    /// The epic's reviewer sends a task's pull request back: its feedback, which the revision
    /// acts on.
    EpicReview,
    /// A task of an epic handed to a person.
    EpicEscalated,
    /// A task of an epic accepted and merged into the epic branch.
    EpicAccepted,
    /// The epic's summary: its tasks, their verdicts and pull requests.
    EpicSummary,
    /// A task of an epic a new plan dropped: why its sub-issue (or pull request) was closed.
    EpicDropped,
}

impl MarkerKind {
    /// Every kind without data, for round trips and listings.
    pub(crate) const FIXED: [MarkerKind; 21] = [
        MarkerKind::Stage,
        MarkerKind::Gates,
        MarkerKind::ScoreGate,
        MarkerKind::Paused,
        MarkerKind::Stopped,
        MarkerKind::Resolved,
        MarkerKind::Revised,
        MarkerKind::RevisionsExhausted,
        MarkerKind::Tracking,
        MarkerKind::Claim,
        MarkerKind::BoardStop,
        MarkerKind::AlreadyRunning,
        MarkerKind::Status,
        MarkerKind::CommandHelp,
        MarkerKind::EpicPlan,
        MarkerKind::EpicRefused,
        MarkerKind::EpicReview,
        MarkerKind::EpicEscalated,
        MarkerKind::EpicAccepted,
        MarkerKind::EpicSummary,
        MarkerKind::EpicDropped,
    ];

    /// The kind as the marker spells it (`kind=…`); fixed since markers are on GitHub already.
    pub(crate) fn as_str(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            MarkerKind::Stage => "stage",
            MarkerKind::Gates => "gates",
            MarkerKind::ScoreGate => "score-gate",
            MarkerKind::Paused => "paused",
            MarkerKind::Stopped => "stopped",
            MarkerKind::Resolved => "resolved",
            MarkerKind::Revised => "revised",
            MarkerKind::RevisionsExhausted => "revisions-exhausted",
            MarkerKind::Thread(id) => return Cow::Owned(format!("thread-{id}")),
            MarkerKind::Tracking => "tracking",
            MarkerKind::Claim => "claim",
            MarkerKind::BoardStop => "board-stop",
            MarkerKind::AlreadyRunning => "already-running",
            MarkerKind::Status => "status",
            MarkerKind::CommandHelp => "command-help",
            MarkerKind::EpicPlan => "epic-plan",
            MarkerKind::EpicRefused => "epic-refused",
            MarkerKind::EpicReview => "epic-review",
            MarkerKind::EpicEscalated => "epic-escalated",
            MarkerKind::EpicAccepted => "epic-accepted",
            MarkerKind::EpicSummary => "epic-summary",
            MarkerKind::EpicDropped => "epic-dropped",
        })
    }

    /// The kind a marker spells; `None` for any other text.
    pub fn parse(s: &str) -> Option<MarkerKind> {
        if let Some(id) = s.strip_prefix("thread-") {
            // Only the digits `as_str` writes: no sign, no leading zero, no spaces.
            let canonical = !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_digit())
                && (id == "0" || !id.starts_with('0'));
            return canonical
                .then(|| id.parse().ok().map(MarkerKind::Thread))
                .flatten();
        }
        MarkerKind::FIXED.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for MarkerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl serde::Serialize for MarkerKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for MarkerKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MarkerKind, D::Error> {
        let s = <Cow<'de, str>>::deserialize(d)?;
        MarkerKind::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("`{s}` is not a kind of comment supervisor writes"))
        })
    }
}

/// Identifies one write of one run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Marker {
    pub run: String,
    pub stage: String,
    pub attempt: u32,
    /// What the comment is.
    pub kind: MarkerKind,
}

impl Marker {
    pub fn new(
        run: impl Into<String>,
        stage: impl Into<String>,
        attempt: u32,
        kind: MarkerKind,
    ) -> Marker {
        Marker {
            run: run.into(),
            stage: stage.into(),
            attempt,
            kind,
        }
    }

    /// The marker of `run`'s tracking comment.
    pub fn tracking(run: &str) -> Marker {
        Marker::new(run, "run", 0, MarkerKind::Tracking)
    }

    /// The hidden HTML comment.
    pub fn render(&self) -> String {
        format!(
            "<!-- supervisor:run={} stage={} attempt={} kind={} -->",
            encode(&self.run),
            encode(&self.stage),
            self.attempt,
            encode(&self.kind.as_str())
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

    /// Every well-formed marker of a known kind in `body`, in order.
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
    pub(crate) fn find_in<'c>(&self, comments: &'c [Comment]) -> Option<&'c Comment> {
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
                "kind" => kind = MarkerKind::parse(&v),
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
        let m = Marker::new("20261101-abc", "Test Design", 2, MarkerKind::Stage);
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
        let m = Marker::new("r1", "Audit", 1, MarkerKind::Stage);
        let body = m.stamp("x");
        assert!(!Marker::new("r1", "Audit", 2, MarkerKind::Stage).is_in(&body));
        assert!(!Marker::new("r2", "Audit", 1, MarkerKind::Stage).is_in(&body));
        assert!(!Marker::new("r1", "Audit", 1, MarkerKind::ScoreGate).is_in(&body));
        assert!(!Marker::new("r1", "Research", 1, MarkerKind::Stage).is_in(&body));
    }

    #[test]
    fn ignores_malformed_markers() {
        assert!(Marker::parse_all("<!-- supervisor:run=x stage=y -->").is_empty());
        assert!(Marker::parse_all("<!-- supervisor:run=x stage=y attempt=z kind=k -->").is_empty());
        assert!(
            Marker::parse_all("<!-- supervisor:run=%ZZ stage=y attempt=1 kind=k -->").is_empty()
        );
        assert_eq!(
            Marker::parse_all("a <!--supervisor:run=x stage=y attempt=1 kind=gates extra=1--> b")
                .len(),
            1
        );
    }

    #[test]
    fn kinds_round_trip() {
        let mut spelled = std::collections::BTreeSet::new();
        for kind in MarkerKind::FIXED
            .into_iter()
            .chain([MarkerKind::Thread(0), MarkerKind::Thread(4711)])
        {
            let s = kind.as_str();
            assert!(spelled.insert(s.clone()), "{s} is spelled twice");
            assert_eq!(MarkerKind::parse(&s), Some(kind), "{s}");
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{s}\""));
            assert_eq!(serde_json::from_str::<MarkerKind>(&json).unwrap(), kind);
        }
        // The spellings on GitHub already.
        assert_eq!(MarkerKind::Tracking.as_str(), "tracking");
        assert_eq!(MarkerKind::ScoreGate.as_str(), "score-gate");
        assert_eq!(
            MarkerKind::RevisionsExhausted.as_str(),
            "revisions-exhausted"
        );
        assert_eq!(MarkerKind::Thread(12).as_str(), "thread-12");
    }

    #[test]
    fn unknown_kinds_are_not_known_ones() {
        for unknown in [
            "",
            "k",
            "summary",
            "close",
            "comment",
            "score",
            "Stage",
            "STAGE",
            " stage",
            "stage ",
            "stage-x",
            "gates2",
            "thread",
            "thread-",
            "thread-x",
            "thread-+1",
            "thread--1",
            "thread-01",
            "thread- 1",
            "thread-99999999999999999999",
            "other",
            "human",
        ] {
            assert_eq!(MarkerKind::parse(unknown), None, "{unknown:?}");
            let body = format!(
                "<!-- supervisor:run=r stage=s attempt=1 kind={} -->",
                encode(unknown)
            );
            assert!(Marker::parse_all(&body).is_empty(), "{body}");
            assert!(serde_json::from_value::<MarkerKind>(serde_json::json!(unknown)).is_err());
        }
        // An unknown kind beside a known one: only the known one is read.
        let body = "<!-- supervisor:run=r stage=s attempt=1 kind=summary -->\n\
                    <!-- supervisor:run=r stage=s attempt=1 kind=gates -->";
        assert_eq!(
            Marker::parse_all(body),
            vec![Marker::new("r", "s", 1, MarkerKind::Gates)]
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
        let m = Marker::new("a--b", "x-->", 1, MarkerKind::Thread(7));
        let text = m.render();
        assert!(!text[4..text.len() - 3].contains("--"), "{text}");
        assert_eq!(Marker::parse_all(&text), vec![m]);
    }

    proptest! {
        #[test]
        fn round_trip(run in ".{0,20}", stage in ".{0,20}", attempt in 0u32..1000, k in 0usize..15, id in any::<u64>()) {
            prop_assume!(!run.is_empty() && !stage.is_empty());
            let kind = MarkerKind::FIXED.get(k).copied().unwrap_or(MarkerKind::Thread(id));
            let m = Marker::new(run, stage, attempt, kind);
            prop_assert_eq!(Marker::parse_all(&m.stamp("body")), vec![m]);
        }

        #[test]
        fn parsing_never_panics(s in ".{0,200}") {
            let _ = Marker::parse_all(&s);
        }

        #[test]
        fn an_unknown_kind_is_never_a_known_one(s in "[a-z0-9+-]{0,24}") {
            match MarkerKind::parse(&s) {
                // Whatever parses spells exactly the kind it parsed to.
                Some(k) => prop_assert_eq!(k.as_str(), s.as_str()),
                None => {
                    let body = format!("<!-- supervisor:run=r stage=s attempt=1 kind={s} -->");
                    prop_assert!(Marker::parse_all(&body).is_empty());
                }
            }
        }
    }
}
