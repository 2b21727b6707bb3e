//! Reading a JSON value into a serde type while finding every mistake in it, not only the first:
//! each value serde refuses is reported at its path (with its line and column) and left out, and
//! the rest is read again.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use super::issue::{ConfigIssue, did_you_mean};
use super::source::JsonIndex;

/// Where a value read from a file is, and where its mistakes go.
pub(crate) struct Reader<'a> {
    pub(crate) file: &'a Path,
    pub(crate) index: &'a JsonIndex,
    pub(crate) errors: &'a mut Vec<ConfigIssue>,
    /// What to do when a message names no better fix (where the format is described).
    pub(crate) fix: &'a str,
}

/// One step of a path into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Item(usize),
}

impl Reader<'_> {
    /// `value`, found at `at` (a dotted path such as `stages[2]`, empty for the whole file), read as a
    /// `T`; `None` when even that is impossible (the value has the wrong shape, or lacks a required
    /// key). Every mistake is reported.
    pub(crate) fn read<T: DeserializeOwned>(&mut self, mut value: Value, at: &str) -> Option<T> {
        // Items taken out of lists, by the list's path as written in the file: the items after
        // them moved up, and the paths serde gives are moved back to the file's numbering.
        let mut removed: Vec<(Vec<Step>, usize)> = Vec::new();
        loop {
            let error = match serde_path_to_error::deserialize::<_, T>(&value) {
                Ok(read) => return Some(read),
                Err(e) => e,
            };
            let mut steps = Vec::new();
            let mut known = true;
            for segment in error.path() {
                match segment {
                    Segment::Seq { index } => steps.push(Step::Item(*index)),
                    Segment::Map { key } => steps.push(Step::Key(key.clone())),
                    Segment::Enum { .. } => {}
                    Segment::Unknown => known = false,
                }
            }
            let message = error.into_inner().to_string();
            let in_file = in_file_numbering(&steps, &removed);
            if let Some(field) = message
                .strip_prefix("missing field `")
                .and_then(|m| m.split('`').next())
            {
                // The object lacks a key it needs: said, and the object left out.
                let object = join(at, &render(&in_file));
                let path = join(&object, field);
                let fix = format!("add \"{field}\"");
                self.report(&path, &object, "is missing (required)".into(), fix);
                if !known || steps.is_empty() || !remove(&mut value, &steps, &in_file, &mut removed)
                {
                    return None;
                }
                continue;
            }
            let path = join(at, &render(&in_file));
            let (problem, fix) = plain(&message, self.fix);
            self.report(&path, &path, problem, fix);
            if !known || steps.is_empty() || !remove(&mut value, &steps, &in_file, &mut removed) {
                return None;
            }
        }
    }

    /// An issue at `path`, positioned at `locate` (the nearest thing the file has).
    pub(crate) fn report(&mut self, path: &str, locate: &str, problem: String, fix: String) {
        let position = self.index.position(locate).or_else(|| {
            // A key that is missing is shown where its object starts.
            let mut parent = locate;
            loop {
                parent = parent
                    .rfind(['.', '['])
                    .map(|i| &parent[..i])
                    .filter(|p| !p.is_empty())?;
                if let Some(p) = self.index.position(parent) {
                    return Some(p);
                }
            }
        });
        self.errors
            .push(ConfigIssue::new(self.file, path, problem, fix).at(position));
    }
}

/// The path serde gives (in the numbering of the value as it is now) in the file's numbering.
fn in_file_numbering(steps: &[Step], removed: &[(Vec<Step>, usize)]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        let step = match step {
            Step::Item(now) => {
                let mut gone: Vec<usize> = removed
                    .iter()
                    .filter(|(list, _)| *list == out)
                    .map(|(_, i)| *i)
                    .collect();
                gone.sort_unstable();
                let mut index = *now;
                for g in gone {
                    if g <= index {
                        index += 1;
                    }
                }
                Step::Item(index)
            }
            key => key.clone(),
        };
        out.push(step);
    }
    out
}

/// Take the value at `steps` out of `value`; false when there is nothing to take.
fn remove(
    value: &mut Value,
    steps: &[Step],
    in_file: &[Step],
    removed: &mut Vec<(Vec<Step>, usize)>,
) -> bool {
    let Some((last, parents)) = steps.split_last() else {
        return false;
    };
    let mut at = value;
    for step in parents {
        let next = match (step, at) {
            (Step::Key(k), Value::Object(map)) => map.get_mut(k),
            (Step::Item(i), Value::Array(items)) => items.get_mut(*i),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return false,
        }
    }
    match (last, at) {
        (Step::Key(k), Value::Object(map)) => map.remove(k).is_some(),
        (Step::Item(i), Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
            if let Some(Step::Item(original)) = in_file.last() {
                removed.push((in_file[..in_file.len() - 1].to_vec(), *original));
            }
            true
        }
        _ => false,
    }
}

fn render(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Item(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// `stages[1]` + `hooks[0]` → `stages[1].hooks[0]`; `stages` + `[0]` → `stages[0]`.
fn join(at: &str, rest: &str) -> String {
    if at.is_empty() {
        rest.to_string()
    } else if rest.is_empty() || rest.starts_with('[') {
        format!("{at}{rest}")
    } else {
        format!("{at}.{rest}")
    }
}

/// A serde message in the words the rest of the configuration errors use: (problem, fix).
pub(super) fn plain(message: &str, fallback_fix: &str) -> (String, String) {
    if let Some((name, known)) = unknown_name(message, "unknown field `") {
        let fix = suggestion(&name, &known).unwrap_or_else(|| {
            if known.is_empty() {
                "remove it".to_string()
            } else {
                format!("remove it; the known keys are {}", known.join(", "))
            }
        });
        return ("is not a known key".into(), fix);
    }
    if let Some((name, known)) = unknown_name(message, "unknown variant `") {
        let fix = suggestion(&name, &known)
            .unwrap_or_else(|| format!("use one of: {}", known.join(", ")));
        return (format!("`{name}` is not one of {}", known.join(", ")), fix);
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some((found, expected)) = message
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once(", expected "))
        {
            let expected = expected_words(expected);
            return (
                format!("is {}, expected {expected}", found_words(found)),
                format!("make it {expected}"),
            );
        }
    }
    (message.to_string(), fallback_fix.to_string())
}

/// The name a message such as "unknown field `x`, expected one of `a`, `b`" is about (after
/// `prefix`), and the names it expected.
fn unknown_name(message: &str, prefix: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix(prefix)?;
    let (name, expected) = rest.split_once('`').unwrap_or((rest, ""));
    let known = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((name.to_string(), known))
}

/// "did you mean …?" when one of `known` is close to `name`.
fn suggestion(name: &str, known: &[String]) -> Option<String> {
    let refs: Vec<&str> = known.iter().map(String::as_str).collect();
    did_you_mean(name, &refs).map(|k| format!("did you mean \"{k}\"?"))
}

/// serde's name of a value found: `string "x"` → `the string "x"`.
fn found_words(found: &str) -> String {
    let inner = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .map(|v| v.trim_matches('`').to_string())
    };
    if found.starts_with("string ") {
        return format!("the {found}");
    }
    for prefix in ["integer ", "floating point "] {
        if let Some(n) = inner(prefix) {
            return format!("the number {n}");
        }
    }
    if let Some(b) = inner("boolean ") {
        return b;
    }
    match found {
        "map" => "an object".into(),
        "sequence" => "a list".into(),
        "null" | "unit value" => "null".into(),
        other => other.to_string(),
    }
}

/// serde's name of a type expected: `u32` → `a whole number ≥ 0`.
fn expected_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number ≥ 0".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" => "an object".into(),
        other if other.starts_with("struct ") => "an object".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq, Default)]
    #[serde(default, deny_unknown_fields, rename_all = "camelCase")]
    struct Item {
        name: String,
        count: u32,
        tags: Vec<String>,
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        items: Vec<Item>,
        #[serde(default)]
        on: bool,
    }

    fn read<T: DeserializeOwned>(text: &str) -> (Option<T>, Vec<ConfigIssue>) {
        let index = JsonIndex::new(text);
        let mut errors = Vec::new();
        let read = Reader {
            file: Path::new("f.json"),
            index: &index,
            errors: &mut errors,
            fix: "see the format",
        }
        .read(serde_json::from_str(text).unwrap(), "");
        (read, errors)
    }

    #[test]
    fn every_mistake_is_named_at_its_line_and_the_rest_is_read() {
        let text = r#"{
  "items": [
    { "name": 5, "count": 1 },
    "not an item",
    { "name": "b", "count": -1, "tags": ["x", 7] },
    { "name": "c", "cuont": 2 }
  ],
  "on": "yes"
}"#;
        let (doc, errors) = read::<Doc>(text);
        let said: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            said,
            [
                "f.json:3:7: `items[0].name`: is the number 5, expected a string — make it a string",
                "f.json:4:5: `items[1]`: is the string \"not an item\", expected an object — make it an object",
                "f.json:5:20: `items[2].count`: is the number -1, expected a whole number ≥ 0 — make it a whole number ≥ 0",
                "f.json:5:47: `items[2].tags[1]`: is the number 7, expected a string — make it a string",
                "f.json:6:20: `items[3].cuont`: is not a known key — did you mean \"count\"?",
                "f.json:8:3: `on`: is the string \"yes\", expected true or false — make it true or false",
            ]
        );
        let doc = doc.unwrap();
        assert_eq!(doc.items.len(), 3);
        assert_eq!(doc.items[1].tags, ["x"]);
        assert_eq!(doc.items[2].name, "c");
        assert!(!doc.on);
    }

    #[test]
    fn a_missing_required_key_is_named_where_its_object_starts() {
        let (doc, errors) = read::<Doc>("{\n  \"on\": true\n}");
        assert!(doc.is_none());
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "items");
        assert_eq!(errors[0].problem, "is missing (required)");
    }
}
