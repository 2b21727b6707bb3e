//! The settings schema, declared once.
//!
//! [`settings_block!`] turns one struct declaration into the struct, its `Serialize`, the table of
//! its keys ([`Block::FIELDS`]: names, kinds, optionality, examples, nested blocks) and the checker
//! that reads a JSON object into it. A field's Rust type decides what it accepts ([`Setting`]), so
//! what `supervisor check` accepts and what the program reads cannot drift apart.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::issue::{ConfigIssue, did_you_mean};
use super::source::JsonIndex;

/// The JSON shape of a setting: what type errors and environment overrides go by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Str,
    /// A whole number ≥ 0.
    Int,
    Float,
    Bool,
    List,
    Object,
}

impl Kind {
    /// A value of this kind, in words.
    fn noun(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Int => "a whole number ≥ 0",
            Kind::Float => "a number",
            Kind::Bool => "true or false",
            Kind::List => "a list",
            Kind::Object => "an object",
        }
    }

    /// Values of this kind, in words.
    fn plural(self) -> &'static str {
        match self {
            Kind::Str => "strings",
            Kind::Int => "whole numbers",
            Kind::Float => "numbers",
            Kind::Bool => "true or false values",
            Kind::List => "lists",
            Kind::Object => "objects",
        }
    }

    fn admits(self, value: &Value) -> bool {
        match self {
            Kind::Str => value.is_string(),
            Kind::Int => value.as_u64().is_some(),
            Kind::Float => value.is_number(),
            Kind::Bool => value.is_boolean(),
            Kind::List => value.is_array(),
            Kind::Object => value.is_object(),
        }
    }
}

/// One key of a settings block, as declared.
#[derive(Debug)]
pub struct Field {
    /// The JSON key, exactly as users write it.
    pub key: &'static str,
    /// The declaration's doc comment.
    pub(crate) doc: &'static str,
    pub(crate) kind: Kind,
    /// `null` is accepted (the field is an `Option`).
    pub nullable: bool,
    /// The key has no default: a block without it is an error.
    pub required: bool,
    /// A JSON value shown in fixes, e.g. `["octocat"]`.
    pub(crate) example: Option<&'static str>,
    /// The keys of a nested block (`gates`).
    pub nested: Option<&'static [Field]>,
    /// What a value must be, in words: "a list of strings".
    pub expected: fn() -> Cow<'static, str>,
}

impl Field {
    /// The doc comment as one line, without its final full stop.
    pub(crate) fn summary(&self) -> String {
        let text = self
            .doc
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('`', "");
        text.trim_end_matches('.').to_string()
    }
}

/// A type a setting can have: how it looks in JSON and how it is checked.
pub trait Setting: Sized {
    const KIND: Kind;
    const NULLABLE: bool = false;
    /// The keys of a nested block.
    const NESTED: Option<&'static [Field]> = None;
    /// What a value must be, in words: "a string".
    fn expected() -> Cow<'static, str> {
        Self::KIND.noun().into()
    }
    /// The same for several, as in "a list of …": "strings".
    fn plural() -> Cow<'static, str> {
        Self::KIND.plural().into()
    }
    /// Check and convert `value`, found at `path`; every problem goes to `checker`.
    fn parse(value: Value, path: &str, checker: &mut Checker) -> Option<Self>;
    /// What stands in for a required value that is missing or wrong (the error said), so that the
    /// rest of the settings can still be checked; `None` when nothing can.
    fn stand_in() -> Option<Self> {
        None
    }
}

/// A settings object declared with [`settings_block!`].
pub trait Block: Setting {
    /// Every key, in declaration order.
    const FIELDS: &'static [Field];

    /// Build the block from its entries (unknown keys already taken out).
    fn from_entries(entries: Map<String, Value>, path: &str, checker: &mut Checker)
    -> Option<Self>;

    /// The block with every field at its default; `None` when a field is required.
    fn defaults() -> Option<Self> {
        let mut checker = Checker::detached();
        let block = Self::from_entries(Map::new(), "", &mut checker);
        block.filter(|_| checker.errors.is_empty())
    }
}

/// Declares a settings block: a struct whose every field carries
/// `#[setting(key = "jsonKey", default = EXPR)]` or `#[setting(key = "jsonKey", required)]`, with an
/// optional `example = "JSON"` shown in fixes. Doc comments come first and describe the setting.
/// A field's type must implement [`Setting`] (leaf types through [`leaf_setting!`], blocks through
/// this macro).
macro_rules! settings_block {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                #[setting(key = $key:literal, $how:ident $(= $default:expr)? $(, example = $example:literal)? $(,)?)]
                $fvis:vis $field:ident : $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize)]
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                #[serde(rename = $key)]
                $fvis $field: $ty,
            )*
        }

        impl $crate::config::schema::Block for $name {
            const FIELDS: &'static [$crate::config::schema::Field] = &[$(
                $crate::config::schema::Field {
                    key: $key,
                    doc: concat!($($doc, "\n"),*),
                    kind: <$ty as $crate::config::schema::Setting>::KIND,
                    nullable: <$ty as $crate::config::schema::Setting>::NULLABLE,
                    required: $crate::config::schema::settings_block!(@required $how),
                    example: $crate::config::schema::settings_block!(@example $($example)?),
                    nested: <$ty as $crate::config::schema::Setting>::NESTED,
                    expected: <$ty as $crate::config::schema::Setting>::expected,
                }
            ),*];

            fn from_entries(
                mut entries: serde_json::Map<String, serde_json::Value>,
                path: &str,
                checker: &mut $crate::config::schema::Checker,
            ) -> Option<Self> {
                let mut rows = <Self as $crate::config::schema::Block>::FIELDS.iter();
                $(
                    let $field = checker.field::<$ty>(
                        &mut entries,
                        path,
                        rows.next().expect("one table row per field"),
                        $crate::config::schema::settings_block!(@default $ty; $how $($default)?),
                    );
                )*
                Some($name { $($field: $field?),* })
            }
        }

        impl $crate::config::schema::Setting for $name {
            const KIND: $crate::config::schema::Kind = $crate::config::schema::Kind::Object;
            const NESTED: Option<&'static [$crate::config::schema::Field]> =
                Some(<Self as $crate::config::schema::Block>::FIELDS);
            fn parse(
                value: serde_json::Value,
                path: &str,
                checker: &mut $crate::config::schema::Checker,
            ) -> Option<Self> {
                checker.block::<Self>(value, path)
            }
        }
    };
    (@required required) => { true };
    (@required default) => { false };
    (@example) => { None };
    (@example $example:literal) => { Some($example) };
    (@default $ty:ty; required) => { None };
    (@default $ty:ty; default $default:expr) => {{
        let make: fn() -> $ty = || $default;
        Some(make)
    }};
}
pub(crate) use settings_block;

/// Makes types that serde reads whole into settings types: `Type: Kind;`, or
/// `Type: Kind, "what a value must be", "the same for several";` where the kind's words say too little.
macro_rules! leaf_setting {
    ($($ty:ty: $kind:ident $(, $expected:literal, $plural:literal)? $(=> $stand_in:expr)?;)*) => {$(
        impl $crate::config::schema::Setting for $ty {
            const KIND: $crate::config::schema::Kind = $crate::config::schema::Kind::$kind;
            $(
                fn expected() -> std::borrow::Cow<'static, str> {
                    $expected.into()
                }
                fn plural() -> std::borrow::Cow<'static, str> {
                    $plural.into()
                }
            )?
            $(
                fn stand_in() -> Option<Self> {
                    Some($stand_in)
                }
            )?
            fn parse(
                value: serde_json::Value,
                path: &str,
                checker: &mut $crate::config::schema::Checker,
            ) -> Option<Self> {
                checker.leaf(value, path)
            }
        }
    )*};
}
pub(crate) use leaf_setting;

leaf_setting! {
    String: Str => String::new();
    PathBuf: Str, "a path", "paths";
    bool: Bool;
    u32: Int => 0;
    u64: Int => 0;
    usize: Int => 0;
    f64: Float;
}

impl<T: Setting> Setting for Option<T> {
    const KIND: Kind = T::KIND;
    const NULLABLE: bool = true;
    const NESTED: Option<&'static [Field]> = T::NESTED;
    fn expected() -> Cow<'static, str> {
        T::expected()
    }
    fn plural() -> Cow<'static, str> {
        T::plural()
    }
    fn parse(value: Value, path: &str, checker: &mut Checker) -> Option<Self> {
        match value {
            Value::Null => Some(None),
            value => T::parse(value, path, checker).map(Some),
        }
    }
}

impl<T: Setting> Setting for Vec<T> {
    const KIND: Kind = Kind::List;
    fn expected() -> Cow<'static, str> {
        format!("a list of {}", T::plural()).into()
    }
    fn stand_in() -> Option<Self> {
        Some(Vec::new())
    }
    fn parse(value: Value, path: &str, checker: &mut Checker) -> Option<Self> {
        let Value::Array(items) = value else {
            checker.type_error(path, &value, &Self::expected());
            return None;
        };
        let parsed: Vec<Option<T>> = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| T::parse(item, &format!("{path}[{i}]"), checker))
            .collect();
        parsed.into_iter().collect()
    }
}

/// Objects of free keys (`statusMapping`, `backends`): each value is checked as a `V`.
impl<V: Setting> Setting for BTreeMap<String, V> {
    const KIND: Kind = Kind::Object;
    fn parse(value: Value, path: &str, checker: &mut Checker) -> Option<Self> {
        let Value::Object(entries) = value else {
            checker.type_error(path, &value, &Self::expected());
            return None;
        };
        let parsed: Vec<(String, Option<V>)> = entries
            .into_iter()
            .map(|(k, v)| {
                let at = join(path, &k);
                (k, V::parse(v, &at, checker))
            })
            .collect();
        parsed.into_iter().map(|(k, v)| Some((k, v?))).collect()
    }
}

/// An unknown key that looks like a misspelling of a key its block lacks.
#[derive(Debug)]
struct Typo {
    /// Path of the key it resembles.
    meant: String,
    /// Path of the unknown key.
    at: String,
    key: String,
}

/// Checks settings text against the declared blocks, collecting every problem with its file and line.
#[derive(Debug)]
pub struct Checker<'a> {
    file: &'a Path,
    index: Option<&'a JsonIndex>,
    errors: Vec<ConfigIssue>,
    warnings: Vec<ConfigIssue>,
    /// The declared field being checked, whose example the fixes show.
    field: Option<&'static Field>,
    typos: Vec<Typo>,
    /// Paths of values that were wrong or missing, now at their default or a stand-in.
    substituted: Vec<String>,
}

impl<'a> Checker<'a> {
    /// A checker for the text of `file`, with `index` pointing at its lines.
    pub fn new(file: &'a Path, index: &'a JsonIndex) -> Self {
        Checker {
            file,
            index: Some(index),
            errors: Vec::new(),
            warnings: Vec::new(),
            field: None,
            typos: Vec::new(),
            substituted: Vec::new(),
        }
    }

    /// A checker for values built in code, with no file behind them.
    pub(crate) fn detached() -> Checker<'static> {
        Checker {
            file: Path::new(""),
            index: None,
            errors: Vec::new(),
            warnings: Vec::new(),
            field: None,
            typos: Vec::new(),
            substituted: Vec::new(),
        }
    }

    /// `(errors, warnings)` found so far.
    pub(crate) fn finish(self) -> (Vec<ConfigIssue>, Vec<ConfigIssue>) {
        (self.errors, self.warnings)
    }

    pub(crate) fn error(&mut self, issue: ConfigIssue) {
        self.errors.push(issue);
    }

    /// An error about the value at `path`, unless one was already said about it, about a value
    /// inside it or about the value it is part of: a value whose type is wrong is checked on with
    /// its default in its place, and that default is not a second mistake.
    pub(crate) fn report(
        &mut self,
        path: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        if self.substituted.iter().any(|s| related(s, path)) {
            return;
        }
        let issue = self.issue(path, problem.into(), fix.into());
        self.errors.push(issue);
    }

    /// A warning about the value at `path`.
    pub(crate) fn warn(&mut self, path: &str, problem: impl Into<String>, fix: impl Into<String>) {
        let issue = self.issue(path, problem.into(), fix.into());
        self.warnings.push(issue);
    }

    /// The line and column of the key or list item at `path`.
    pub(crate) fn position(&self, path: &str) -> Option<(usize, usize)> {
        self.index.and_then(|i| i.position(path))
    }

    fn issue(&self, path: &str, problem: String, fix: String) -> ConfigIssue {
        ConfigIssue::new(self.file, path, problem, fix).at(self.position(path))
    }

    /// Check an object against block `B`: unknown keys are warnings (with the closest known key),
    /// then every declared field is checked.
    pub(crate) fn block<B: Block>(&mut self, value: Value, path: &str) -> Option<B> {
        let Value::Object(mut entries) = value else {
            self.type_error(path, &value, "an object");
            return None;
        };
        let known: Vec<&'static str> = B::FIELDS.iter().map(|f| f.key).collect();
        let unknown: Vec<String> = entries
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            entries.remove(&key);
            let at = join(path, &key);
            let suggestion = did_you_mean(&key, &known);
            let fix = match suggestion {
                Some(k) => format!("did you mean \"{k}\"?"),
                None => "remove it; it is ignored".to_string(),
            };
            let warning = self.issue(&at, "is not a known setting".into(), fix);
            self.warnings.push(warning);
            if let Some(meant) = suggestion {
                self.typos.push(Typo {
                    meant: join(path, meant),
                    at,
                    key,
                });
            }
        }
        B::from_entries(entries, path, self)
    }

    /// Take `field` out of `entries` (at `path`) and check it; its default when absent.
    pub(crate) fn field<T: Setting>(
        &mut self,
        entries: &mut Map<String, Value>,
        path: &str,
        field: &'static Field,
        default: Option<fn() -> T>,
    ) -> Option<T> {
        let at = join(path, field.key);
        let value = match (entries.remove(field.key), default) {
            (Some(value), _) => {
                let outer = self.field.replace(field);
                let parsed = T::parse(value, &at, self);
                self.field = outer;
                parsed
            }
            (None, Some(make)) => return Some(make()),
            (None, None) => {
                self.missing(&at, field);
                None
            }
        };
        if value.is_some() {
            return value;
        }
        // A value that is wrong (said already) is checked on as its default, or as a stand-in when
        // it has none, so that one mistake does not hide the rest of the file.
        self.substituted.push(at);
        default.map(|make| make()).or_else(T::stand_in)
    }

    /// A required field is absent: said together with the unknown key that looks like it, if any.
    fn missing(&mut self, at: &str, field: &'static Field) {
        if let Some(i) = self.typos.iter().position(|t| t.meant == at) {
            let typo = self.typos.remove(i);
            self.warnings.retain(|w| w.field != typo.at);
            let issue = self.issue(
                &typo.at,
                format!(
                    "is missing (required); \"{}\" looks like a misspelling of it",
                    typo.key
                ),
                format!("rename \"{}\" to \"{}\"", typo.key, field.key),
            );
            self.errors.push(ConfigIssue {
                field: at.to_string(),
                ..issue
            });
            return;
        }
        let fix = match field.example {
            Some(example) => format!(
                "add \"{}\": {example}, {}",
                field.key,
                lowercase_first(&field.summary())
            ),
            None => format!("add \"{}\": {}", field.key, field.summary()),
        };
        self.errors.push(ConfigIssue::new(
            self.file,
            at,
            "is missing (required)",
            fix,
        ));
    }

    /// A value serde reads whole: its JSON shape first (for a plain message), then serde itself.
    pub(crate) fn leaf<T: Setting + DeserializeOwned>(
        &mut self,
        value: Value,
        path: &str,
    ) -> Option<T> {
        if !T::KIND.admits(&value) {
            self.type_error(path, &value, &T::expected());
            return None;
        }
        match serde_json::from_value(value) {
            Ok(v) => Some(v),
            Err(e) => {
                let fix = match self.field.and_then(|f| f.example.map(|x| (f.key, x))) {
                    Some((key, example)) => format!("write it like \"{key}\": {example}"),
                    None => "see the README, Configuration".to_string(),
                };
                let issue = self.issue(path, e.to_string(), fix);
                self.errors.push(issue);
                None
            }
        }
    }

    /// `value` at `path` has the wrong JSON type.
    pub(crate) fn type_error(&mut self, path: &str, value: &Value, expected: &str) {
        let mut fix = format!("make it {expected}");
        if let Some((key, example)) = self.field.and_then(|f| f.example.map(|x| (f.key, x))) {
            fix.push_str(&format!(", e.g. \"{key}\": {example}"));
        }
        let issue = self.issue(
            path,
            format!("is {}, expected {expected}", json_type(value)),
            fix,
        );
        self.errors.push(issue);
    }
}

/// Whether one of two setting paths is the other or holds it (`a.b` and `a.b[1]`, `a` and `a.b`).
fn related(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long.strip_prefix(short)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// `supervisor` + `repo` → `supervisor.repo`.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn json_type(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string \"{s}\""),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}
