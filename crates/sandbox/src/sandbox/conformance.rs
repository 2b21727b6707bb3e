//! Holding the sandbox and its clients to GitHub's published descriptions.
//!
//! With [`Sandbox::check_conformance`](super::Sandbox::check_conformance) switched on, every REST
//! exchange is checked against GitHub's REST description (the operations supervisor uses, vendored
//! in `src/github/openapi/rest.json` by `scripts/vendor-openapi.py`): the request's path and query
//! parameters and its body against the operation's parameters and request schema, the answer's body
//! against the schema of its status. Every GraphQL answer is checked against the shape of the query
//! that asked for it, typed by GitHub's schema: each selected field present under its alias, of its
//! schema type (`Int` within 32 bits, `BigInt` digits in a string, `DateTime` in whole or fractional
//! seconds, enums among their values, non-null fields not null unless an error says why), nothing
//! unselected. What does not conform is recorded as a [`Violation`] naming the operation and the
//! field; a test then fails with the list.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use graphql_parser::query::{
    Document, OperationDefinition, Selection, SelectionSet, Type, TypeCondition,
};
use serde_json::Value;

use super::schema::SchemaIndex;

/// GitHub's REST description, trimmed to the operations supervisor uses.
pub const REST_DESCRIPTION: &str = include_str!("../../../github/src/github/openapi/rest.json");

const ROOT: &str = "file:///github-rest.json";

/// Which side of an exchange broke the description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The client's request.
    Request,
    /// The sandbox's answer.
    Response,
}

/// One way an exchange differs from GitHub's description.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// The REST operation id (`issues/get`) or `graphql <OperationName>`.
    pub(crate) operation: String,
    pub(crate) side: Side,
    /// The answer's status, for answers.
    pub(crate) status: Option<u16>,
    /// Where: a JSON pointer into the body (`/user/avatar_url`), `query.per_page`, `path.ref`, …
    pub(crate) field: String,
    pub(crate) problem: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match (self.side, self.status) {
            (Side::Request, _) => "request".to_string(),
            (Side::Response, Some(s)) => format!("answer {s}"),
            (Side::Response, None) => "answer".to_string(),
        };
        let field = if self.field.is_empty() {
            "(body)"
        } else {
            &self.field
        };
        write!(f, "{} {side}: {field}: {}", self.operation, self.problem)
    }
}

/// One REST operation of the description.
struct Operation {
    id: String,
    method: String,
    /// Path segments; `Err` stands for a parameter (its name).
    segments: Vec<Result<String, String>>,
    /// The last segment is a git reference (`/git/ref/{ref}`: `heads/<branch>`), whose value
    /// spans the path's remaining segments.
    spans: bool,
    parameters: Vec<Parameter>,
    body: Option<(bool, boon::SchemaIndex)>,
    responses: HashMap<String, Option<boon::SchemaIndex>>,
}

struct Parameter {
    name: String,
    location: String,
    required: bool,
    schema: boon::SchemaIndex,
}

/// The compiled description.
pub(crate) struct RestContract {
    operations: Vec<Operation>,
    schemas: boon::Schemas,
}

impl RestContract {
    /// The vendored description, compiled once.
    pub(crate) fn get() -> Result<&'static RestContract, String> {
        static CONTRACT: OnceLock<Result<RestContract, String>> = OnceLock::new();
        CONTRACT
            .get_or_init(|| RestContract::compile(REST_DESCRIPTION))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn compile(text: &str) -> Result<RestContract, String> {
        let doc: Value =
            serde_json::from_str(text).map_err(|e| format!("rest.json does not parse: {e}"))?;
        let mut compiler = boon::Compiler::new();
        compiler.set_default_draft(boon::Draft::V2020_12);
        compiler
            .add_resource(ROOT, doc.clone())
            .map_err(|e| e.to_string())?;
        let mut schemas = boon::Schemas::new();
        let mut compile = |pointer: String| {
            compiler
                .compile(&format!("{ROOT}#{pointer}"), &mut schemas)
                .map_err(|e| format!("{pointer}: {e}"))
        };
        let mut operations = Vec::new();
        let ops = doc["operations"]
            .as_object()
            .ok_or("rest.json has no operations")?;
        for (id, op) in ops {
            let base = format!("/operations/{}", id.replace('~', "~0").replace('/', "~1"));
            let segments = op["path"]
                .as_str()
                .unwrap_or_default()
                .split('/')
                .filter(|s| !s.is_empty())
                .map(
                    |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                        Some(name) => Err(name.to_string()),
                        None => Ok(s.to_string()),
                    },
                )
                .collect::<Vec<_>>();
            let spans = matches!(segments.last(), Some(Err(name)) if name == "ref")
                && segments.iter().any(|s| s.as_deref() == Ok("git"));
            let mut parameters = Vec::new();
            for (i, p) in op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                parameters.push(Parameter {
                    name: p["name"].as_str().unwrap_or_default().to_string(),
                    location: p["in"].as_str().unwrap_or_default().to_string(),
                    required: p["required"].as_bool().unwrap_or(false),
                    schema: compile(format!("{base}/parameters/{i}/schema"))?,
                });
            }
            let body = match op.get("requestBody") {
                Some(b) => Some((
                    b["required"].as_bool().unwrap_or(false),
                    compile(format!("{base}/requestBody/schema"))?,
                )),
                None => None,
            };
            let mut responses = HashMap::new();
            for (status, r) in op["responses"].as_object().into_iter().flatten() {
                let schema = if r["schema"].is_null() {
                    None
                } else {
                    Some(compile(format!("{base}/responses/{status}/schema"))?)
                };
                responses.insert(status.clone(), schema);
            }
            operations.push(Operation {
                id: id.clone(),
                method: op["method"].as_str().unwrap_or_default().to_string(),
                segments,
                spans,
                parameters,
                body,
                responses,
            });
        }
        Ok(RestContract {
            operations,
            schemas,
        })
    }

    /// The operation `method path` (no query) is, and its path parameters.
    fn operation(&self, method: &str, path: &str) -> Option<(&Operation, Vec<(&str, String)>)> {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        self.operations.iter().find_map(|op| {
            let n = op.segments.len();
            let fits = n == parts.len() || (op.spans && parts.len() > n);
            if !op.method.eq_ignore_ascii_case(method) || !fits {
                return None;
            }
            let mut params = Vec::new();
            for (i, seg) in op.segments.iter().enumerate() {
                // The last segment of a spanning operation takes the rest of the path.
                let part = if i + 1 == n {
                    parts[i..].join("/")
                } else {
                    parts[i].to_string()
                };
                match seg {
                    Ok(fixed) if *fixed == part => {}
                    Ok(_) => return None,
                    Err(name) => params.push((
                        name.as_str(),
                        percent_encoding::percent_decode_str(&part)
                            .decode_utf8_lossy()
                            .into_owned(),
                    )),
                }
            }
            Some((op, params))
        })
    }

    /// The id of the operation `method path` is, if the description has it.
    pub(crate) fn operation_id(&self, method: &str, path: &str) -> Option<&str> {
        self.operation(method, path).map(|(op, _)| op.id.as_str())
    }

    /// Check a request: path and query parameters, and the JSON body.
    pub(crate) fn check_request(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
        body: &[u8],
    ) -> Vec<Violation> {
        let Some((op, path_params)) = self.operation(method, path) else {
            return vec![Violation {
                operation: format!("{method} {path}"),
                side: Side::Request,
                status: None,
                field: String::new(),
                problem:
                    "no operation of GitHub's description (as vendored) has this method and path"
                        .into(),
            }];
        };
        let mut out = Vec::new();
        let mut flag = |field: String, problem: String| {
            out.push(Violation {
                operation: op.id.clone(),
                side: Side::Request,
                status: None,
                field,
                problem,
            });
        };
        let query: Vec<(String, String)> = query
            .map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .into_owned()
                    .collect()
            })
            .unwrap_or_default();
        for p in &op.parameters {
            let given: Vec<&String> = match p.location.as_str() {
                "path" => path_params
                    .iter()
                    .filter(|(n, _)| *n == p.name)
                    .map(|(_, v)| v)
                    .collect(),
                "query" => query
                    .iter()
                    .filter(|(n, _)| *n == p.name)
                    .map(|(_, v)| v)
                    .collect(),
                _ => continue,
            };
            if given.is_empty() && p.required {
                flag(
                    format!("{}.{}", p.location, p.name),
                    "required, not given".into(),
                );
            }
            for v in given {
                if let Err(e) = self.schemas.validate(&typed(v), p.schema) {
                    flag(
                        format!("{}.{}", p.location, p.name),
                        format!("`{v}`: {}", leaves(&e).join("; ")),
                    );
                }
            }
        }
        for (name, _) in &query {
            if !op
                .parameters
                .iter()
                .any(|p| p.location == "query" && &p.name == name)
            {
                flag(
                    format!("query.{name}"),
                    "not a parameter of this operation".into(),
                );
            }
        }
        match (&op.body, body.is_empty()) {
            (Some((true, _)), true) => flag(String::new(), "a JSON body is required".into()),
            (Some((_, schema)), false) => match serde_json::from_slice::<Value>(body) {
                Ok(v) => {
                    if let Err(e) = self.schemas.validate(&v, *schema) {
                        for (field, problem) in leaf_pairs(&e) {
                            flag(field, problem);
                        }
                    }
                }
                Err(e) => flag(String::new(), format!("the body is not JSON: {e}")),
            },
            (None, false) => flag(String::new(), "this operation takes no body".into()),
            _ => {}
        }
        out
    }

    /// Check an answer's JSON body against the schema of its status.
    pub(crate) fn check_response(
        &self,
        method: &str,
        path: &str,
        status: u16,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Vec<Violation> {
        let Some((op, _)) = self.operation(method, path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut flag = |field: String, problem: String| {
            out.push(Violation {
                operation: op.id.clone(),
                side: Side::Response,
                status: Some(status),
                field,
                problem,
            });
        };
        let json = content_type.is_none_or(|t| t.contains("json"));
        if status == 304 || status == 204 || !json {
            return out;
        }
        let value = match serde_json::from_slice::<Value>(body) {
            Ok(v) => v,
            Err(e) => {
                flag(String::new(), format!("the body is not JSON: {e}"));
                return out;
            }
        };
        match op.responses.get(&status.to_string()) {
            Some(Some(schema)) => {
                if let Err(e) = self.schemas.validate(&value, *schema) {
                    for (field, problem) in leaf_pairs(&e) {
                        flag(field, problem);
                    }
                }
            }
            Some(None) => {}
            // GitHub answers errors it does not list too (401, 403, 429, 5xx): with a message.
            None if status >= 400 => {
                if !value.get("message").is_some_and(Value::is_string) {
                    flag(
                        "/message".into(),
                        "an error answer carries a `message`".into(),
                    );
                }
            }
            None => flag(
                String::new(),
                format!("status {status} is not an answer this operation has"),
            ),
        }
        out
    }
}

/// Check a REST request (method, path without query, query, body) against GitHub's vendored
/// description, as [`Sandbox::check_conformance`](super::Sandbox::check_conformance) does: for
/// tests that serve the client from elsewhere (wiremock). `Err` when the description does not
/// compile.
pub fn check_rest_request(
    method: &str,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Result<Vec<Violation>, String> {
    Ok(RestContract::get()?.check_request(method, path, query, body))
}

/// The id of the REST operation `method path` is (`issues/get`), if the vendored description has it.
pub fn rest_operation_id(method: &str, path: &str) -> Option<String> {
    RestContract::get()
        .ok()?
        .operation_id(method, path)
        .map(str::to_string)
}

/// A path or query value as the JSON its schema describes: digits as a number, `true`/`false`.
fn typed(v: &str) -> Value {
    if let Ok(n) = v.parse::<i64>() {
        return Value::from(n);
    }
    match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(v.to_string()),
    }
}

/// The innermost errors: where, and what.
fn leaf_pairs(e: &boon::ValidationError) -> Vec<(String, String)> {
    if e.causes.is_empty() {
        return vec![(e.instance_location.to_string(), e.kind.to_string())];
    }
    e.causes.iter().flat_map(leaf_pairs).collect()
}

fn leaves(e: &boon::ValidationError) -> Vec<String> {
    leaf_pairs(e)
        .into_iter()
        .map(|(at, what)| {
            if at.is_empty() {
                what
            } else {
                format!("{at}: {what}")
            }
        })
        .collect()
}

/// Check a GraphQL answer against the query's shape, typed by GitHub's schema.
pub(crate) fn check_graphql_answer<'a, 'q>(
    doc: &'a Document<'q, &'q str>,
    op: &'a OperationDefinition<'q, &'q str>,
    name: &str,
    answer: &Value,
) -> Vec<Violation> {
    let schema = SchemaIndex::get();
    let (root, set) = match op {
        OperationDefinition::Query(q) => ("Query", &q.selection_set),
        OperationDefinition::Mutation(m) => ("Mutation", &m.selection_set),
        OperationDefinition::SelectionSet(s) => ("Query", s),
        OperationDefinition::Subscription(_) => return Vec::new(),
    };
    let mut check = AnswerCheck {
        schema,
        fragments: crate::github::graphql::fragment_map(doc),
        error_paths: answer["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["path"].as_array().cloned())
            .collect(),
        operation: format!("graphql {name}"),
        out: Vec::new(),
    };
    match answer.get("data") {
        Some(Value::Object(data)) => check.object(root, set, data, &mut Vec::new()),
        Some(Value::Null) | None if answer["errors"].as_array().is_some_and(|e| !e.is_empty()) => {}
        _ => check.flag(&[], "an answer has `data` or `errors`".into()),
    }
    check.out
}

struct AnswerCheck<'a, 'q> {
    schema: &'static SchemaIndex,
    fragments: HashMap<&'q str, &'a graphql_parser::query::FragmentDefinition<'q, &'q str>>,
    error_paths: Vec<Vec<Value>>,
    operation: String,
    out: Vec<Violation>,
}

impl<'a, 'q> AnswerCheck<'a, 'q> {
    fn flag(&mut self, path: &[Value], problem: String) {
        let field = path
            .iter()
            .map(|p| match p {
                Value::String(s) => format!("/{s}"),
                other => format!("/{other}"),
            })
            .collect::<String>();
        self.out.push(Violation {
            operation: self.operation.clone(),
            side: Side::Response,
            status: Some(200),
            field,
            problem,
        });
    }

    /// Whether an error of the answer explains a null at `path` (its path, or one inside it).
    fn explained(&self, path: &[Value]) -> bool {
        self.error_paths
            .iter()
            .any(|e| e.len() >= path.len() && e[..path.len()] == *path)
    }

    /// The fields `set` selects on an object of runtime type `runtime`, by response key.
    fn selected(
        &self,
        runtime: &str,
        set: &'a SelectionSet<'q, &'q str>,
        out: &mut Vec<(String, &'a graphql_parser::query::Field<'q, &'q str>)>,
    ) {
        for item in &set.items {
            match item {
                Selection::Field(f) => {
                    let key = f.alias.unwrap_or(f.name).to_string();
                    if !out.iter().any(|(k, _)| *k == key) {
                        out.push((key, f));
                    }
                }
                Selection::FragmentSpread(s) => {
                    if let Some(frag) = self.fragments.get(s.fragment_name).copied() {
                        let TypeCondition::On(cond) = frag.type_condition;
                        if self.schema.matches(runtime, cond) {
                            self.selected(runtime, &frag.selection_set, out);
                        }
                    }
                }
                Selection::InlineFragment(i) => {
                    let applies = match &i.type_condition {
                        None => true,
                        Some(TypeCondition::On(cond)) => self.schema.matches(runtime, cond),
                    };
                    if applies {
                        self.selected(runtime, &i.selection_set, out);
                    }
                }
            }
        }
    }

    fn object(
        &mut self,
        static_type: &str,
        set: &'a SelectionSet<'q, &'q str>,
        data: &serde_json::Map<String, Value>,
        path: &mut Vec<Value>,
    ) {
        let runtime = match data.get("__typename").and_then(Value::as_str) {
            Some(t) => {
                if !self.schema.matches(t, static_type) {
                    self.flag(
                        &[path.clone(), vec![Value::from("__typename")]].concat(),
                        format!("`{t}` is not a {static_type}"),
                    );
                }
                t.to_string()
            }
            None => static_type.to_string(),
        };
        let mut fields = Vec::new();
        self.selected(&runtime, set, &mut fields);
        for key in data.keys() {
            if !fields.iter().any(|(k, _)| k == key) {
                path.push(Value::from(key.as_str()));
                let at = path.clone();
                path.pop();
                self.flag(&at, "not selected by the query".into());
            }
        }
        for (key, field) in fields {
            path.push(Value::from(key.as_str()));
            if field.name == "__typename" {
                if !data.get(&key).is_some_and(Value::is_string) {
                    let at = path.clone();
                    self.flag(&at, "`__typename` is a type name".into());
                }
            } else {
                let conditional = !field.directives.is_empty();
                match (data.get(&key), self.schema.field_type(&runtime, field.name)) {
                    (None, _) if conditional => {}
                    (None, _) => {
                        let at = path.clone();
                        self.flag(&at, "selected but missing".into());
                    }
                    (Some(v), Some(ty)) => self.value(ty, &field.selection_set, v, path),
                    // A field GitHub does not have: the answer's errors say so.
                    (Some(_), None) => {}
                }
            }
            path.pop();
        }
    }

    fn value(
        &mut self,
        ty: &Type<'static, &'static str>,
        set: &'a SelectionSet<'q, &'q str>,
        v: &Value,
        path: &mut Vec<Value>,
    ) {
        match ty {
            Type::NonNullType(inner) => {
                if v.is_null() {
                    if !self.explained(path) {
                        let at = path.clone();
                        self.flag(
                            &at,
                            "null in a non-null field, with no error saying why".into(),
                        );
                    }
                } else {
                    self.value(inner, set, v, path);
                }
            }
            _ if v.is_null() => {}
            Type::ListType(inner) => match v.as_array() {
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        path.push(Value::from(i));
                        self.value(inner, set, item, path);
                        path.pop();
                    }
                }
                None => {
                    let at = path.clone();
                    self.flag(&at, "a list was expected".into());
                }
            },
            Type::NamedType(name) => self.named(name, set, v, path),
        }
    }

    fn named(
        &mut self,
        name: &str,
        set: &'a SelectionSet<'q, &'q str>,
        v: &Value,
        path: &mut Vec<Value>,
    ) {
        let problem = match name {
            "Int" => v
                .as_i64()
                .is_none_or(|n| i32::try_from(n).is_err())
                .then(|| format!("`{v}` is not a 32-bit Int")),
            "Float" => (!v.is_number()).then(|| format!("`{v}` is not a Float")),
            "Boolean" => (!v.is_boolean()).then(|| format!("`{v}` is not a Boolean")),
            "String" | "ID" | "URI" | "HTML" | "GitObjectID" | "GitSSHRemote"
            | "X509Certificate" | "Base64String" | "GitRefname" | "Date" | "PreciseDateTime" => {
                (!v.is_string()).then(|| format!("`{v}` is not a string"))
            }
            "BigInt" => (!v.as_str().is_some_and(|s| {
                !s.is_empty()
                    && s.trim_start_matches('-')
                        .bytes()
                        .all(|b| b.is_ascii_digit())
            }))
            .then(|| format!("`{v}` is not a BigInt (digits in a string)")),
            "DateTime" => (!v.as_str().is_some_and(is_date_time))
                .then(|| format!("`{v}` is not an ISO 8601 DateTime")),
            _ => {
                if let Some(values) = self.schema.enum_values(name) {
                    (!v.as_str().is_some_and(|s| values.contains(s)))
                        .then(|| format!("`{v}` is not a value of enum {name}"))
                } else if self.schema.has_type(name) {
                    match v.as_object() {
                        Some(obj) => {
                            self.object(name, set, obj, path);
                            None
                        }
                        None => Some(format!("an object of type {name} was expected")),
                    }
                } else {
                    // Another custom scalar: any JSON value.
                    None
                }
            }
        };
        if let Some(problem) = problem {
            let at = path.clone();
            self.flag(&at, problem);
        }
    }
}

/// `2026-11-23T09:00:00Z`, with optional fraction and offset.
fn is_date_time(s: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphql_parser::query::Definition;
    use serde_json::json;

    #[test]
    fn the_vendored_description_compiles_and_names_operations() {
        let c = RestContract::get().unwrap();
        assert_eq!(
            c.operation_id("GET", "/repos/o/r/issues/5"),
            Some("issues/get")
        );
        assert_eq!(
            c.operation_id("GET", "/repos/o/r/commits/feature%2Fx/check-runs"),
            Some("checks/list-for-ref")
        );
        assert_eq!(c.operation_id("DELETE", "/repos/o/r/issues/5"), None);
        // A git reference spans segments (`heads/<branch>`); other parameters do not.
        assert_eq!(
            c.operation_id("GET", "/repos/o/r/git/ref/heads/feature/x"),
            Some("git/get-ref")
        );
        assert!(
            c.check_request("GET", "/repos/o/r/git/ref/heads/feature/x", None, b"")
                .is_empty()
        );
        assert_eq!(c.operation_id("GET", "/repos/o/r/issues/5/x"), None);
        assert_eq!(c.operation_id("GET", "/repos/o/r/commits/feature/x"), None);
    }

    #[test]
    fn requests_are_checked_against_parameters_and_body() {
        let c = RestContract::get().unwrap();
        assert!(
            c.check_request(
                "GET",
                "/repos/o/r/issues/5/comments",
                Some("per_page=100&page=2"),
                b""
            )
            .is_empty()
        );
        let bad = c.check_request(
            "GET",
            "/repos/o/r/issues/x/comments",
            Some("perpage=100"),
            b"",
        );
        let fields: Vec<&str> = bad.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["path.issue_number", "query.perpage"],
            "{bad:?}"
        );
        let missing = c.check_request("POST", "/repos/o/r/issues/5/comments", None, b"{}");
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(
            missing[0]
                .to_string()
                .starts_with("issues/create-comment request"),
            "{}",
            missing[0]
        );
        let wrong = c.check_request(
            "POST",
            "/repos/o/r/pulls",
            None,
            br#"{"head": "a", "base": 3}"#,
        );
        assert_eq!(wrong[0].field, "/base", "{wrong:?}");
    }

    #[test]
    fn answers_are_checked_against_the_status_schema() {
        let c = RestContract::get().unwrap();
        let v = c.check_response(
            "GET",
            "/repos/o/r/issues/5",
            200,
            Some("application/json"),
            br#"{"id": 1, "number": 5}"#,
        );
        assert!(v.iter().any(|v| v.problem.contains("user")), "{v:?}");
        assert!(v.iter().all(|v| v.operation == "issues/get"));
        let ok_error = c.check_response(
            "GET",
            "/repos/o/r/issues/5",
            401,
            None,
            br#"{"message": "Bad credentials"}"#,
        );
        assert!(ok_error.is_empty());
        let sha = c.check_response(
            "GET",
            "/repos/o/r/commits/main",
            200,
            Some("application/vnd.github.sha"),
            b"abc",
        );
        assert!(sha.is_empty());
    }

    #[test]
    fn graphql_answers_are_checked_against_the_query() {
        let doc = graphql_parser::parse_query::<&str>(
            "query Q { repository(owner: \"o\", name: \"r\") { issue(number: 1) { number databaseId fullDatabaseId createdAt state } } }",
        )
        .unwrap();
        let Definition::Operation(op) = &doc.definitions[0] else {
            unreachable!()
        };
        let good = json!({"data": {"repository": {"issue": {"number": 1, "databaseId": 7,
            "fullDatabaseId": "3100000007", "createdAt": "2026-01-01T00:00:00Z", "state": "OPEN"}}}});
        assert_eq!(check_graphql_answer(&doc, op, "Q", &good), vec![]);
        let bad = json!({"data": {"repository": {"issue": {"number": 1, "databaseId": 3_100_000_007u64,
            "fullDatabaseId": 3_100_000_007u64, "createdAt": "yesterday", "state": "SHUT", "extra": 1}}}});
        let found = check_graphql_answer(&doc, op, "Q", &bad);
        let fields: Vec<&str> = found.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "/repository/issue/extra",
                "/repository/issue/databaseId",
                "/repository/issue/fullDatabaseId",
                "/repository/issue/createdAt",
                "/repository/issue/state"
            ],
            "{found:?}"
        );
        // A null non-null field is fine only when an error explains it.
        let null = json!({"data": {"repository": {"issue": {"number": null, "databaseId": null,
            "fullDatabaseId": null, "createdAt": "2026-01-01T00:00:00Z", "state": "OPEN"}}}});
        assert_eq!(check_graphql_answer(&doc, op, "Q", &null).len(), 1);
        let explained = json!({"data": null, "errors": [{"message": "x"}]});
        assert!(check_graphql_answer(&doc, op, "Q", &explained).is_empty());
    }
}
