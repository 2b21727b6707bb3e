//! The agent output protocol: from an agent's final text to a typed outcome.
//!
//! Order of evidence: the LAST fenced ```json block; else the last balanced top-level `{…}` (found by a
//! string-aware scanner); for review stages, `## Audit Approved` / `## Audit Rejected` headings; then the
//! stage's text markers (the last occurrence wins). Empty output, a refusal and "no marker" are distinct
//! errors. A JSON object that is present but wrong is reported as such, not passed over.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::{Dimension, Stage};

/// What the agent says it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Action {
    Complete,
    Approved,
    Rejected,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Complete => "COMPLETE",
            Action::Approved => "APPROVED",
            Action::Rejected => "REJECTED",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Suggestion,
}

impl Severity {
    pub(crate) fn parse(s: &str) -> Option<Severity> {
        match s.trim().to_ascii_lowercase().as_str() {
            "critical" | "blocker" | "error" => Some(Severity::Critical),
            "warning" | "major" | "warn" => Some(Severity::Warning),
            "suggestion" | "minor" | "info" | "nit" => Some(Severity::Suggestion),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Suggestion => "suggestion",
        }
    }
}

/// One finding of a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFinding {
    pub severity: Severity,
    pub dimension: Dimension,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// The auditor's own count, checked but never trusted for the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimedScore {
    pub passing: u32,
    pub total: u32,
}

/// Which evidence the outcome came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "camelCase")]
pub enum Evidence {
    /// A fenced ```json block.
    FencedJson,
    /// A bare `{…}` found in the text.
    BareJson,
    /// `## Audit Approved` / `## Audit Rejected`.
    Heading(String),
    /// A marker of the stage's markerMap.
    Marker(String),
}

/// A parsed, validated agent outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub action: Action,
    pub evidence: Evidence,
    pub agent_name: Option<String>,
    pub summary: Option<String>,
    pub comment_body: Option<String>,
    pub target_status: Option<String>,
    pub audit_score: Option<ClaimedScore>,
    pub findings: Vec<AuditFinding>,
    pub pr_title: Option<String>,
    pub pr_body: Option<String>,
    /// For marker evidence: the status the marker maps to.
    pub marker_target: Option<String>,
    /// Things that were tolerated (an unknown key, a repaired string) worth showing.
    pub notes: Vec<String>,
    /// The tests this answer designates (a test designer's): they must fail on the base and pass
    /// on the head.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<crate::evidence::TestSelector>,
    /// Each acceptance criterion → its tests, or why none can check it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contract: Vec<crate::evidence::Criterion>,
    /// The test designer says the issue is already resolved: its tests pass on the base.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already_resolved: bool,
    /// Set when a budget stopped the agent and its answer was kept as it was (a stage that may
    /// degrade): how the agent was stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
}

impl Outcome {
    fn bare(action: Action, evidence: Evidence) -> Outcome {
        Outcome {
            action,
            evidence,
            agent_name: None,
            summary: None,
            comment_body: None,
            target_status: None,
            audit_score: None,
            findings: Vec::new(),
            pr_title: None,
            pr_body: None,
            marker_target: None,
            notes: Vec::new(),
            tests: Vec::new(),
            contract: Vec::new(),
            already_resolved: false,
            partial: None,
        }
    }
}

/// Why no outcome could be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ProtocolError {
    #[error("Output is empty: the agent produced no final text")]
    Empty,
    #[error("Agent refused: {reason}")]
    Refusal { reason: String },
    #[error(
        "no outcome found: the output has no JSON block with an \"action\" and none of the stage's markers ({markers}); \
         the agent must end with a ```json block as its role prompt describes"
    )]
    NoMarker { markers: String },
    #[error("invalid outcome: `{field}` {problem}")]
    Invalid { field: String, problem: String },
    #[error(
        "invalid JSON in the last ```json block: {message}; the agent must end with one valid JSON object"
    )]
    InvalidJson { message: String },
}

/// Strip ANSI escape sequences (CSI, OSC and two-byte escapes).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            if c != '\u{9b}' {
                out.push(c);
                continue;
            }
            // 8-bit CSI.
            for n in chars.by_ref() {
                if ('@'..='~').contains(&n) {
                    break;
                }
            }
            continue;
        }
        match chars.peek() {
            Some('[') => {
                chars.next();
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            }
            Some(']') => {
                chars.next();
                // OSC ends with BEL or ESC \ (or, when unterminated, at the end of the line).
                while let Some(n) = chars.next() {
                    if n == '\u{7}' {
                        break;
                    }
                    if n == '\n' {
                        out.push(n);
                        break;
                    }
                    if n == '\u{1b}' {
                        if chars.peek() == Some(&'\\') {
                            chars.next();
                        }
                        break;
                    }
                }
            }
            Some(_) => {
                // nF sequences: intermediates 0x20–0x2F, then one final byte (ESC ( B, ESC 7…).
                while chars.peek().is_some_and(|n| (' '..='/').contains(n)) {
                    chars.next();
                }
                chars.next();
            }
            None => {}
        }
    }
    out
}

/// Bodies of fenced code blocks tagged `json` (or untagged blocks that hold an object), in order.
pub fn fenced_json_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some((fence_start, fence_len, fence_char)) = find_fence(rest) {
        let after_fence = &rest[fence_start + fence_len..];
        let info_end = after_fence.find('\n').unwrap_or(after_fence.len());
        let info = after_fence[..info_end].trim().to_ascii_lowercase();
        let body_start = fence_start + fence_len + (info_end + 1).min(after_fence.len());
        let body = &rest[body_start..];
        // Closing fence: a line of at least fence_len fence chars.
        let mut close = None;
        let mut pos = 0;
        for line in body.split_inclusive('\n') {
            let t = line.trim();
            if t.len() >= fence_len && t.chars().all(|c| c == fence_char) {
                close = Some(pos);
                break;
            }
            pos += line.len();
        }
        let (content, consumed) = match close {
            Some(p) => (&body[..p], body_start + p + 1),
            // An unclosed block runs to the end (truncated output).
            None => (body, rest.len()),
        };
        let is_json = info == "json"
            || info == "jsonc"
            || info.starts_with("json ")
            || (info.is_empty() && content.trim_start().starts_with('{'));
        if is_json {
            blocks.push(content);
        }
        if consumed >= rest.len() {
            break;
        }
        rest = &rest[consumed..];
    }
    blocks
}

/// (start, length, char) of the next line-leading fence of ≥ 3 backticks or tildes.
fn find_fence(text: &str) -> Option<(usize, usize, char)> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        let t = &line[indent..];
        for fc in ['`', '~'] {
            let n = t.chars().take_while(|&c| c == fc).count();
            if n >= 3 {
                return Some((offset + indent, n, fc));
            }
        }
        offset += line.len();
    }
    None
}

/// Balanced top-level `{…}` spans. Braces inside JSON strings do not count; quotes are only tracked
/// inside braces, so prose apostrophes and quotes between objects cannot derail the scan.
pub fn balanced_objects(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if depth == 0 {
            if b == b'{' {
                depth = 1;
                start = i;
                in_string = false;
                escaped = false;
            }
            continue;
        }
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    spans.push(&text[start..=i]);
                }
            }
            _ => {}
        }
    }
    spans
}

/// Make near-JSON parse: escape raw control characters inside strings, drop trailing commas.
pub fn repair_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            if escaped {
                escaped = false;
                out.push(c);
            } else if c == '\\' {
                escaped = true;
                out.push(c);
            } else if c == '"' {
                in_string = false;
                out.push(c);
            } else if c == '\n' {
                out.push_str("\\n");
            } else if c == '\r' {
                out.push_str("\\r");
            } else if c == '\t' {
                out.push_str("\\t");
            } else if (c as u32) < 0x20 {
                out.push_str(&format!("\\u{:04x}", c as u32));
            } else {
                out.push(c);
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == ',' {
            // Trailing comma before } or ]?
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if !matches!(next, Some('}') | Some(']')) {
                out.push(c);
            }
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// Parse text as a JSON object, repairing it if it does not parse as written.
fn parse_object(text: &str) -> Option<(Map<String, Value>, bool)> {
    let trimmed = text.trim();
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(trimmed) {
        return Some((m, false));
    }
    match serde_json::from_str::<Value>(&repair_json(trimmed)) {
        Ok(Value::Object(m)) => Some((m, true)),
        _ => None,
    }
}

fn is_protocol_object(m: &Map<String, Value>) -> bool {
    m.contains_key("action") || m.contains_key("refusal")
}

/// Parse an agent's final text for a stage.
pub fn parse_outcome(raw: &str, stage: &Stage) -> Result<Outcome, ProtocolError> {
    let text = strip_ansi(raw);
    if text.trim().is_empty() {
        return Err(ProtocolError::Empty);
    }

    // 1. The last fenced json block that holds a protocol object.
    let fenced = fenced_json_blocks(&text);
    if let Some(block) = fenced.last() {
        if let Some((obj, repaired)) = parse_object(block).filter(|(m, _)| is_protocol_object(m)) {
            return from_object(obj, stage, Evidence::FencedJson, repaired);
        }
        // The last block did not parse (truncated?) or is not ours: fall through to earlier evidence.
    }
    // 2. The last balanced object that holds a protocol object.
    for span in balanced_objects(&text).into_iter().rev() {
        if let Some((obj, repaired)) = parse_object(span).filter(|(m, _)| is_protocol_object(m)) {
            return from_object(obj, stage, Evidence::BareJson, repaired);
        }
    }
    // Earlier fenced blocks, if the last one was unusable.
    for block in fenced.iter().rev().skip(1) {
        if let Some((obj, repaired)) = parse_object(block).filter(|(m, _)| is_protocol_object(m)) {
            return from_object(obj, stage, Evidence::FencedJson, repaired);
        }
    }

    // 3. Review headings; 4. markers. The one appearing last in the text wins.
    let mut best: Option<(usize, Outcome)> = None;
    if stage.review {
        for (heading, action) in [
            ("Audit Approved", Action::Approved),
            ("Audit Rejected", Action::Rejected),
        ] {
            if let Some(pos) = last_heading(&text, heading) {
                if best.as_ref().is_none_or(|(p, _)| pos > *p) {
                    let mut o = Outcome::bare(action, Evidence::Heading(format!("## {heading}")));
                    o.comment_body = Some(text.trim().to_string());
                    best = Some((pos, o));
                }
            }
        }
        if let Some((_, o)) = best.take() {
            return Ok(o);
        }
    }
    for (marker, target) in &stage.marker_map {
        if let Some(pos) = last_marker(&text, marker) {
            if best.as_ref().is_none_or(|(p, _)| pos > *p) {
                let action = marker_action(stage, target);
                let mut o = Outcome::bare(action, Evidence::Marker(marker.clone()));
                o.marker_target = Some(target.clone());
                let body = text.trim().to_string();
                o.comment_body = (!body.is_empty()).then_some(body);
                best = Some((pos, o));
            }
        }
    }
    if let Some((_, o)) = best {
        return Ok(o);
    }
    // A ```json block that does not parse is the agent's attempt at an outcome: say what is wrong
    // with it rather than that there is none.
    if let Some(block) = fenced.last() {
        let trimmed = block.trim();
        if let Err(e) = serde_json::from_str::<Value>(trimmed) {
            if serde_json::from_str::<Value>(&repair_json(trimmed)).is_err() {
                return Err(ProtocolError::InvalidJson {
                    message: e.to_string(),
                });
            }
        }
    }
    Err(ProtocolError::NoMarker {
        markers: if stage.marker_map.is_empty() {
            "none defined".into()
        } else {
            stage
                .marker_map
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        },
    })
}

/// A marker leading backwards from a review stage is a rejection; forwards, an approval.
fn marker_action(stage: &Stage, target: &str) -> Action {
    if !stage.review {
        return Action::Complete;
    }
    if stage.can_loop_back_to.iter().any(|t| t == target)
        || stage.reject_to.as_deref() == Some(target)
    {
        Action::Rejected
    } else {
        Action::Approved
    }
}

/// Byte offset of the last line that is exactly the heading `## <title>` (any level 1–6).
fn last_heading(text: &str, title: &str) -> Option<usize> {
    let mut found = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) {
            let rest = t[hashes..].trim().trim_end_matches('#').trim();
            if rest.eq_ignore_ascii_case(title) {
                found = Some(offset);
            }
        }
        offset += line.len();
    }
    found
}

/// Byte offset of the last occurrence of `marker` standing as its own word.
fn last_marker(text: &str, marker: &str) -> Option<usize> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = None;
    let mut from = 0;
    while let Some(pos) = text[from..].find(marker) {
        let at = from + pos;
        let before = text[..at].chars().next_back();
        let after = text[at + marker.len()..].chars().next();
        if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
            found = Some(at);
        }
        from = at + marker.len().max(1);
        if from >= text.len() {
            break;
        }
    }
    found
}

fn invalid(field: &str, problem: impl Into<String>) -> ProtocolError {
    ProtocolError::Invalid {
        field: field.to_string(),
        problem: problem.into(),
    }
}

fn opt_string(m: &Map<String, Value>, key: &str) -> Result<Option<String>, ProtocolError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.trim().is_empty())),
        Some(other) => Err(invalid(key, format!("must be a string, found {other}"))),
    }
}

fn from_object(
    m: Map<String, Value>,
    stage: &Stage,
    evidence: Evidence,
    repaired: bool,
) -> Result<Outcome, ProtocolError> {
    if let Some(refusal) = m.get("refusal") {
        let reason = match refusal {
            Value::String(s) => s.trim().to_string(),
            Value::Null | Value::Bool(false) => String::new(),
            other => other.to_string(),
        };
        if !reason.is_empty() {
            return Err(ProtocolError::Refusal { reason });
        }
    }
    let action = match m.get("action") {
        Some(Value::String(a)) => match a.trim().to_ascii_uppercase().as_str() {
            "COMPLETE" | "COMPLETED" | "DONE" => Action::Complete,
            "APPROVED" | "APPROVE" => Action::Approved,
            "REJECTED" | "REJECT" => Action::Rejected,
            _ => {
                return Err(invalid(
                    "action",
                    format!("is `{a}`; expected COMPLETE, APPROVED or REJECTED"),
                ));
            }
        },
        Some(other) => {
            return Err(invalid(
                "action",
                format!("must be a string, found {other}"),
            ));
        }
        None => return Err(invalid("action", "is missing")),
    };
    if stage.review && action == Action::Complete {
        return Err(invalid(
            "action",
            format!(
                "is COMPLETE, but the {} stage reviews: expected APPROVED or REJECTED",
                stage.status
            ),
        ));
    }
    if !stage.review && action == Action::Rejected {
        return Err(invalid(
            "action",
            format!(
                "is REJECTED, but the {} stage does not review: use COMPLETE, with targetStatus to send work back",
                stage.status
            ),
        ));
    }
    let mut o = Outcome::bare(action, evidence);
    if repaired {
        o.notes
            .push("the JSON needed repair (raw control characters or trailing commas)".into());
    }
    o.agent_name = opt_string(&m, "agentName")?;
    o.summary = opt_string(&m, "summary")?;
    o.comment_body = opt_string(&m, "commentBody")?;
    o.target_status = opt_string(&m, "targetStatus")?;
    o.pr_title = opt_string(&m, "prTitle")?;
    o.pr_body = opt_string(&m, "prBody")?;
    if let Some(name) = &o.agent_name {
        if stage.agent.as_deref().is_some_and(|a| a != name) {
            o.notes.push(format!(
                "agentName `{name}` differs from the stage's agent `{}`",
                stage.agent.as_deref().unwrap_or_default()
            ));
        }
    }
    match m.get("auditScore") {
        None | Some(Value::Null) => {}
        Some(Value::Object(s)) => {
            let num = |k: &str| -> Result<u32, ProtocolError> {
                s.get(k)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        invalid(&format!("auditScore.{k}"), "must be a whole number ≥ 0")
                    })
            };
            let score = ClaimedScore {
                passing: num("passing")?,
                total: num("total")?,
            };
            if score.passing > score.total {
                return Err(invalid(
                    "auditScore",
                    format!("claims {} passing of {} total", score.passing, score.total),
                ));
            }
            o.audit_score = Some(score);
        }
        Some(other) => {
            return Err(invalid(
                "auditScore",
                format!("must be {{\"passing\": N, \"total\": M}}, found {other}"),
            ));
        }
    }
    match m.get("findings") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                o.findings.push(parse_finding(i, item)?);
            }
        }
        Some(other) => {
            return Err(invalid(
                "findings",
                format!("must be a list, found {other}"),
            ));
        }
    }
    o.tests = parse_tests(&m)?;
    o.contract = parse_contract(&m)?;
    o.already_resolved = match m.get("alreadyResolved") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(invalid(
                "alreadyResolved",
                format!("must be true or false, found {other}"),
            ));
        }
    };
    const KNOWN: [&str; 14] = [
        "action",
        "agentName",
        "summary",
        "commentBody",
        "targetStatus",
        "auditScore",
        "findings",
        "prTitle",
        "prBody",
        "refusal",
        "notes",
        "tests",
        "contract",
        "alreadyResolved",
    ];
    for key in m.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
        o.notes.push(format!("ignored unknown key `{key}`"));
    }
    Ok(o)
}

/// A designated test: `{"file": ..., "name": ...}` (either may be left out, not both), or the
/// string `"file::name"` / `"file"`.
fn parse_selector(
    field: &str,
    item: &Value,
) -> Result<crate::evidence::TestSelector, ProtocolError> {
    use crate::evidence::TestSelector;
    let text = |v: Option<&Value>, k: &str| -> Result<Option<String>, ProtocolError> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
            Some(other) => Err(invalid(
                &format!("{field}.{k}"),
                format!("must be a non-empty string, found {other}"),
            )),
        }
    };
    let selector = match item {
        Value::String(s) => match s.trim().split_once("::") {
            Some((file, name)) if !file.is_empty() && !name.is_empty() => {
                TestSelector::test(file.trim(), name.trim())
            }
            _ if !s.trim().is_empty() => TestSelector::file(s.trim()),
            _ => return Err(invalid(field, "is empty")),
        },
        Value::Object(o) => TestSelector {
            file: text(o.get("file"), "file")?,
            name: text(o.get("name"), "name")?,
        },
        other => {
            return Err(invalid(
                field,
                format!(
                    "must be {{\"file\": ..., \"name\": ...}} or \"file::name\", found {other}"
                ),
            ));
        }
    };
    if selector.file.is_none() && selector.name.is_none() {
        return Err(invalid(field, "names neither a file nor a test"));
    }
    if let Some(f) = &selector.file {
        let p = std::path::Path::new(f);
        if p.is_absolute()
            || p.components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(invalid(
                &format!("{field}.file"),
                format!("`{f}` must be a path relative to the repository, without `..`"),
            ));
        }
    }
    Ok(selector)
}

fn parse_tests(
    m: &serde_json::Map<String, Value>,
) -> Result<Vec<crate::evidence::TestSelector>, ProtocolError> {
    match m.get("tests") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_selector(&format!("tests[{i}]"), item))
            .collect(),
        Some(other) => Err(invalid("tests", format!("must be a list, found {other}"))),
    }
}

fn parse_contract(
    m: &serde_json::Map<String, Value>,
) -> Result<Vec<crate::evidence::Criterion>, ProtocolError> {
    let items = match m.get("contract") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(invalid(
                "contract",
                format!("must be a list, found {other}"),
            ));
        }
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = |k: &str| format!("contract[{i}].{k}");
        let Value::Object(o) = item else {
            return Err(invalid(&format!("contract[{i}]"), "must be an object"));
        };
        let criterion = match o.get("criterion") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Err(invalid(
                    &at("criterion"),
                    "is missing: the checklist item's text or number",
                ));
            }
        };
        let tests = match o.get("tests") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(t)) => t
                .iter()
                .enumerate()
                .map(|(j, s)| parse_selector(&format!("contract[{i}].tests[{j}]"), s))
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(invalid(
                    &at("tests"),
                    format!("must be a list, found {other}"),
                ));
            }
        };
        let untestable = match o.get("untestable") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => None,
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(other) => {
                return Err(invalid(
                    &at("untestable"),
                    format!("must say why no test can check it, found {other}"),
                ));
            }
        };
        if tests.is_empty() && untestable.is_none() {
            return Err(invalid(
                &format!("contract[{i}]"),
                "names no test and no reason it cannot be tested: give \"tests\" or \"untestable\"",
            ));
        }
        out.push(crate::evidence::Criterion {
            criterion,
            tests,
            untestable,
        });
    }
    Ok(out)
}

fn parse_finding(i: usize, item: &Value) -> Result<AuditFinding, ProtocolError> {
    let field = |k: &str| format!("findings[{i}].{k}");
    let Value::Object(f) = item else {
        return Err(invalid(&format!("findings[{i}]"), "must be an object"));
    };
    let severity = match f.get("severity") {
        Some(Value::String(s)) => Severity::parse(s).ok_or_else(|| {
            invalid(
                &field("severity"),
                format!("is `{s}`; expected critical, warning or suggestion"),
            )
        })?,
        _ => {
            return Err(invalid(
                &field("severity"),
                "is missing; expected critical, warning or suggestion",
            ));
        }
    };
    let dimension = match f.get("dimension") {
        Some(Value::String(s)) if !s.trim().is_empty() => Dimension::parse(s).ok_or_else(|| {
            invalid(
                &field("dimension"),
                format!(
                    "is `{}`, which is not an audit dimension; use one of {}",
                    s.trim(),
                    Dimension::names()
                ),
            )
        })?,
        _ => {
            return Err(invalid(
                &field("dimension"),
                format!(
                    "is missing; name one of the audit dimensions: {}",
                    Dimension::names()
                ),
            ));
        }
    };
    let message = match f.get("message").or_else(|| f.get("description")) {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(invalid(&field("message"), "is missing")),
    };
    let file = f.get("file").and_then(Value::as_str).map(str::to_string);
    let line = f
        .get("line")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    Ok(AuditFinding {
        severity,
        dimension,
        message,
        file,
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Workflow;
    use std::collections::BTreeMap;

    fn wf() -> Workflow {
        Workflow::builtin(&BTreeMap::new())
    }

    fn parse(text: &str, status: &str) -> Result<Outcome, ProtocolError> {
        let wf = wf();
        parse_outcome(text, wf.stage(status).unwrap())
    }

    #[test]
    fn a_test_designers_tests_and_contract_are_read_and_checked() {
        use crate::evidence::TestSelector;
        let text = r#"```json
{ "action": "COMPLETE", "agentName": "test-designer",
  "tests": [ { "file": "src/a.test.ts", "name": "a > works" }, "tests/test_b.py::test_b", "tests/c.rs" ],
  "contract": [ { "criterion": 1, "tests": ["src/a.test.ts::a > works"] },
                { "criterion": "the README says so", "untestable": "prose" } ],
  "alreadyResolved": false }
```"#;
        let o = parse(text, "TestDesign").unwrap();
        assert_eq!(
            o.tests,
            vec![
                TestSelector::test("src/a.test.ts", "a > works"),
                TestSelector::test("tests/test_b.py", "test_b"),
                TestSelector::file("tests/c.rs"),
            ]
        );
        assert_eq!(o.contract.len(), 2);
        assert_eq!(o.contract[0].criterion, "1");
        assert_eq!(
            o.contract[0].tests,
            vec![TestSelector::test("src/a.test.ts", "a > works")]
        );
        assert_eq!(o.contract[1].untestable.as_deref(), Some("prose"));
        assert!(!o.already_resolved);
        assert!(o.notes.is_empty(), "{:?}", o.notes);
        for (body, field) in [
            (r#""tests": [{"file": "/etc/passwd"}]"#, "tests[0].file"),
            (r#""tests": [{"file": "../x.test.ts"}]"#, "tests[0].file"),
            (r#""tests": [{}]"#, "tests[0]"),
            (r#""tests": [""]"#, "tests[0]"),
            (r#""tests": "a.test.ts""#, "tests"),
            (r#""contract": [{"criterion": "1"}]"#, "contract[0]"),
            (
                r#""contract": [{"tests": ["a.test.ts"]}]"#,
                "contract[0].criterion",
            ),
            (
                r#""contract": [{"criterion": "1", "untestable": true}]"#,
                "contract[0].untestable",
            ),
            (r#""alreadyResolved": "yes""#, "alreadyResolved"),
        ] {
            let text = format!("```json\n{{\"action\": \"COMPLETE\", {body}}}\n```");
            match parse(&text, "TestDesign") {
                Err(ProtocolError::Invalid { field: f, .. }) => assert_eq!(f, field, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn prose_around_fenced_json() {
        let text = "I looked at the code.\n\nHere is my result:\n\n```json\n{\n  \"action\": \"COMPLETE\",\n  \"agentName\": \"researcher\",\n  \"summary\": \"found it\",\n  \"commentBody\": \"## Research Findings\\n\\nAll good.\"\n}\n```\n\nLet me know if you need more.";
        let o = parse(text, "Research").unwrap();
        assert_eq!(o.action, Action::Complete);
        assert_eq!(o.evidence, Evidence::FencedJson);
        assert_eq!(o.summary.as_deref(), Some("found it"));
        assert_eq!(
            o.comment_body.as_deref(),
            Some("## Research Findings\n\nAll good.")
        );
        assert!(o.notes.is_empty());
    }

    #[test]
    fn the_last_fenced_block_wins() {
        let text = "Draft:\n```json\n{\"action\": \"COMPLETE\", \"summary\": \"draft\"}\n```\nFinal:\n```json\n{\"action\": \"COMPLETE\", \"summary\": \"final\", \"targetStatus\": \"Research\"}\n```\n";
        let o = parse(text, "Architecture").unwrap();
        assert_eq!(o.summary.as_deref(), Some("final"));
        assert_eq!(o.target_status.as_deref(), Some("Research"));
    }

    #[test]
    fn braces_inside_strings_do_not_count() {
        let text = "Result follows {not json} and then\n{\"action\": \"COMPLETE\", \"commentBody\": \"use `fn x() { if a { b } }` and \\\"{\\\" quotes }}}\"}\ntrailing prose with a brace {";
        let o = parse(text, "TestDesign").unwrap();
        assert_eq!(o.evidence, Evidence::BareJson);
        assert_eq!(
            o.comment_body.as_deref(),
            Some("use `fn x() { if a { b } }` and \"{\" quotes }}}")
        );
    }

    #[test]
    fn ansi_colours_are_stripped() {
        let text = "\u{1b}[32m```json\u{1b}[0m\n{\"action\": \"\u{1b}[1mCOMPLETE\u{1b}[0m\", \"summary\": \"\u{1b}]8;;http://x\u{7}ok\u{1b}]8;;\u{7}\"}\n```";
        let o = parse(text, "Research").unwrap();
        assert_eq!(o.action, Action::Complete);
        assert_eq!(o.summary.as_deref(), Some("ok"));
        assert_eq!(strip_ansi("a\u{1b}[1;31mb\u{1b}[0mc\u{1b}(Bd"), "abcd");
    }

    #[test]
    fn raw_newlines_in_strings_are_repaired() {
        let text = "```json\n{\"action\": \"COMPLETE\", \"commentBody\": \"## Research Findings\n\n- line one\n- line two\",}\n```";
        let o = parse(text, "Research").unwrap();
        assert_eq!(
            o.comment_body.as_deref(),
            Some("## Research Findings\n\n- line one\n- line two")
        );
        assert_eq!(o.notes.len(), 1);
    }

    #[test]
    fn invalid_json_in_a_json_block_is_reported_with_the_parsers_message() {
        let text = "Done.\n```json\n{\"action\": \"COMPLETE\", \"summary\": \"x\" \"commentBody\": \"y\"}\n```\n";
        match parse(text, "Research") {
            Err(ProtocolError::InvalidJson { message }) => {
                assert!(message.contains("line 1 column"), "{message}");
                let shown = ProtocolError::InvalidJson { message }.to_string();
                assert!(
                    shown.starts_with("invalid JSON in the last ```json block"),
                    "{shown}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Valid JSON that is not an outcome is still "no outcome".
        assert!(matches!(
            parse("```json\n{\"files\": 3}\n```", "Research"),
            Err(ProtocolError::NoMarker { .. })
        ));
    }

    #[test]
    fn truncated_json_is_invalid_json() {
        let text = "```json\n{\"action\": \"COMPLETE\", \"commentBody\": \"## Research Findings\\n\\nThe module";
        match parse(text, "Research") {
            Err(ProtocolError::InvalidJson { message }) => {
                assert!(message.contains("EOF"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        // Unless a marker was written before the cut.
        let text = "RESEARCH_COMPLETE\n```json\n{\"action\": \"COMPLETE\", \"commentBody\": \"cut";
        let o = parse(text, "Research").unwrap();
        assert_eq!(o.evidence, Evidence::Marker("RESEARCH_COMPLETE".into()));
    }

    #[test]
    fn truncated_last_block_falls_back_to_an_earlier_one() {
        let text = "```json\n{\"action\": \"COMPLETE\", \"summary\": \"first\"}\n```\nmore:\n```json\n{\"action\": \"COMP";
        let o = parse(text, "Research").unwrap();
        assert_eq!(o.summary.as_deref(), Some("first"));
    }

    #[test]
    fn markers_only_last_occurrence_wins() {
        let text =
            "I considered FEEDBACK_RESEARCH but the research is fine.\nARCHITECTURE_COMPLETE\n";
        let o = parse(text, "Architecture").unwrap();
        assert_eq!(o.evidence, Evidence::Marker("ARCHITECTURE_COMPLETE".into()));
        assert_eq!(o.marker_target.as_deref(), Some("TestDesign"));
        let text = "ARCHITECTURE_COMPLETE was premature.\nFEEDBACK_RESEARCH";
        let o = parse(text, "Architecture").unwrap();
        assert_eq!(o.marker_target.as_deref(), Some("Research"));
        // Markers must stand alone.
        assert!(matches!(
            parse("PRE_RESEARCH_COMPLETED", "Research"),
            Err(ProtocolError::NoMarker { .. })
        ));
    }

    #[test]
    fn audit_markers_map_to_verdicts() {
        let o = parse("Looks good.\nAUDIT_DECISION: APPROVED", "Audit").unwrap();
        assert_eq!(o.action, Action::Approved);
        assert_eq!(o.marker_target.as_deref(), Some("Done"));
        let o = parse(
            "AUDIT_APPROVED ... then I found a bug. AUDIT_REJECTED",
            "Audit",
        )
        .unwrap();
        assert_eq!(o.action, Action::Rejected);
    }

    #[test]
    fn headings_only() {
        let o = parse("## Audit Approved\n\nAll dimensions pass.", "Audit").unwrap();
        assert_eq!(o.action, Action::Approved);
        assert_eq!(o.evidence, Evidence::Heading("## Audit Approved".into()));
        let o = parse(
            "## Audit Approved\n(draft)\n### Audit Rejected\nA test is missing.",
            "Audit",
        )
        .unwrap();
        assert_eq!(o.action, Action::Rejected);
        // Headings outrank markers for review stages.
        let o = parse("AUDIT_APPROVED\n## Audit Rejected\n", "Audit").unwrap();
        assert_eq!(o.action, Action::Rejected);
        // And mean nothing outside review stages.
        assert!(parse("## Audit Approved", "Research").is_err());
    }

    #[test]
    fn empty_refusal_and_no_marker_are_distinct() {
        assert_eq!(parse("", "Research"), Err(ProtocolError::Empty));
        assert_eq!(
            parse(" \n\u{1b}[0m\t", "Research"),
            Err(ProtocolError::Empty)
        );
        assert_eq!(
            parse(
                "```json\n{\"refusal\": \"I will not delete the database.\"}\n```",
                "Research"
            ),
            Err(ProtocolError::Refusal {
                reason: "I will not delete the database.".into()
            })
        );
        // An empty refusal is not a refusal.
        let o = parse("{\"action\": \"COMPLETE\", \"refusal\": \"\"}", "Research").unwrap();
        assert_eq!(o.action, Action::Complete);
        assert!(matches!(
            parse("I did some things.", "Research"),
            Err(ProtocolError::NoMarker { .. })
        ));
        assert!(ProtocolError::Empty.to_string().contains("Output is empty"));
        assert!(
            ProtocolError::Refusal { reason: "x".into() }
                .to_string()
                .starts_with("Agent refused: x")
        );
    }

    #[test]
    fn auditor_json_is_validated() {
        let good = r###"```json
{ "action": "APPROVED", "agentName": "auditor", "commentBody": "## Audit Approved",
  "auditScore": { "passing": 7, "total": 8 },
  "findings": [ { "severity": "warning", "dimension": "Test-Quality", "message": "thin", "file": "a.ts", "line": 3 },
                { "severity": "suggestion", "dimension": "code-quality", "description": "rename" } ],
  "prTitle": "feat(#1): x", "prBody": "## PR" }
```"###;
        let o = parse(good, "Audit").unwrap();
        assert_eq!(o.action, Action::Approved);
        assert_eq!(
            o.audit_score,
            Some(ClaimedScore {
                passing: 7,
                total: 8
            })
        );
        assert_eq!(o.findings.len(), 2);
        assert_eq!(
            o.findings[0].dimension,
            crate::config::Dimension::TestQuality
        );
        assert_eq!(o.findings[0].line, Some(3));
        assert_eq!(o.findings[1].message, "rename");
        assert_eq!(o.pr_title.as_deref(), Some("feat(#1): x"));

        let cases = [
            (
                r#"{"action": "APPROVED", "auditScore": {"passing": 9, "total": 8}}"#,
                "auditScore",
            ),
            (
                r#"{"action": "APPROVED", "auditScore": {"passing": -1, "total": 8}}"#,
                "auditScore.passing",
            ),
            (
                r#"{"action": "APPROVED", "findings": [{"severity": "fatal", "dimension": "x", "message": "m"}]}"#,
                "findings[0].severity",
            ),
            (
                r#"{"action": "REJECTED", "findings": [{"severity": "critical", "message": "m"}]}"#,
                "findings[0].dimension",
            ),
            (
                r#"{"action": "REJECTED", "findings": [{"severity": "critical", "dimension": "test-quality"}]}"#,
                "findings[0].message",
            ),
            (
                r#"{"action": "APPROVED", "findings": [{"severity": "critical", "dimension": "security", "message": "m"}]}"#,
                "findings[0].dimension",
            ),
            (r#"{"action": "REJECTED", "findings": "none"}"#, "findings"),
            (r#"{"action": "COMPLETE"}"#, "action"),
            (r#"{"action": "MAYBE"}"#, "action"),
            (r#"{"action": 3}"#, "action"),
            (r#"{"action": "APPROVED", "prTitle": 5}"#, "prTitle"),
        ];
        for (text, field) in cases {
            match parse(text, "Audit") {
                Err(ProtocolError::Invalid { field: f, .. }) => assert_eq!(f, field, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn non_review_stages_cannot_reject() {
        assert!(matches!(
            parse(r#"{"action": "REJECTED"}"#, "Architecture"),
            Err(ProtocolError::Invalid { .. })
        ));
        // APPROVED is accepted as a completion synonym outside review stages.
        assert_eq!(
            parse(r#"{"action": "approved"}"#, "Architecture")
                .unwrap()
                .action,
            Action::Approved
        );
    }

    #[test]
    fn unrelated_json_is_skipped() {
        let text = "Config I saw: {\"compilerOptions\": {\"strict\": true}}\nRESEARCH_COMPLETE";
        let o = parse(text, "Research").unwrap();
        assert_eq!(o.evidence, Evidence::Marker("RESEARCH_COMPLETE".into()));
        let text = "{\"action\": \"COMPLETE\"}\nthen {\"compilerOptions\": {}}";
        assert_eq!(
            parse(text, "Research").unwrap().evidence,
            Evidence::BareJson
        );
    }

    #[test]
    fn untagged_fence_holding_an_object_counts() {
        let o = parse("```\n{\"action\": \"COMPLETE\"}\n```", "Research").unwrap();
        assert_eq!(o.evidence, Evidence::FencedJson);
        let o = parse(
            "~~~json\n{\"action\": \"COMPLETE\", \"summary\": \"tilde\"}\n~~~",
            "Research",
        )
        .unwrap();
        assert_eq!(o.summary.as_deref(), Some("tilde"));
    }

    #[test]
    fn a_realistic_pi_transcript_final_message() {
        let text = include_str!("../../../../tests/fixtures/protocol/auditor-reject.txt");
        let o = parse(text, "Audit").unwrap();
        assert_eq!(o.action, Action::Rejected);
        assert_eq!(o.findings.len(), 3);
        assert!(o.findings.iter().any(|f| f.severity == Severity::Critical));
        assert!(
            o.comment_body
                .as_deref()
                .unwrap()
                .starts_with("## Audit Rejected")
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            #[test]
            fn never_panics_on_any_text(s in "\\PC*") {
                let wf = wf();
                for stage in &wf.stages {
                    let _ = parse_outcome(&s, stage);
                }
            }

            #[test]
            fn never_panics_on_json_like_text(s in "[{}\\[\\]\",:\\\\a-zA-Z0-9 \n`#_-]{0,200}") {
                let wf = wf();
                let _ = parse_outcome(&s, wf.stage("Audit").unwrap());
                let _ = parse_outcome(&format!("```json\n{s}"), wf.stage("Research").unwrap());
                let _ = repair_json(&s);
                let _ = balanced_objects(&s);
                let _ = strip_ansi(&s);
            }

            #[test]
            fn a_valid_block_is_always_found(prose in "[^`{}~]{0,100}", summary in "[a-zA-Z0-9 .,!?'\"{}]{0,40}") {
                let obj = serde_json::json!({"action": "COMPLETE", "summary": summary});
                let text = format!("{prose}\n```json\n{obj}\n```\n{prose}");
                let wf = wf();
                let o = parse_outcome(&text, wf.stage("Research").unwrap()).unwrap();
                prop_assert_eq!(o.summary, Some(summary.clone()).filter(|s| !s.trim().is_empty()));
            }
        }
    }
}
