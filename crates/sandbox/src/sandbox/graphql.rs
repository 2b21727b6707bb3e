//! GraphQL over the sandbox's state: the operation is parsed with graphql-parser and its selection
//! set executed over the data, so hand-written queries work as well as supervisor's own (variables,
//! aliases, fragments, inline fragments, `__typename`, `@skip`/`@include`).
//!
//! The subset of GitHub's schema emulated: `repository`, `user`, `organization`, `repositoryOwner`,
//! `viewer`, `node`, `rateLimit`; repositories, issues, pull requests (with their reviews, review
//! threads and review comments), comments, labels; Projects v2 boards, their single-select status
//! field and options, items and their status values; the mutations `updateProjectV2ItemFieldValue`,
//! `addProjectV2ItemById`, `createProjectV2`, `linkProjectV2ToRepository`, `updateProjectV2Field`,
//! `resolveReviewThread` and `unresolveReviewThread`; issues' sub-issues (`subIssues`, `parent`,
//! `subIssuesSummary`) and the mutations `addSubIssue` and `removeSubIssue`, over the state the REST
//! routes share (fine-grained tokens and App installations need `issues: write`, as there). Issue
//! dependencies are REST only: the schema (`@octokit/graphql-schema`, vendored) has no `blockedBy`.
//! A field GitHub does not have gets GitHub's `undefinedField` error; one it has that the sandbox
//! does not emulate is `null` with a `SANDBOX_UNSUPPORTED` error. Project data needs the
//! `read:project` or `project` scope (mutations `project`), else the answer is GitHub's
//! `INSUFFICIENT_SCOPES` error.

use std::collections::HashMap;

use graphql_parser::Pos;
use graphql_parser::query::{
    Definition, Directive, Document, FragmentDefinition, OperationDefinition, Selection,
    SelectionSet, TypeCondition, Value as GqlValue, VariableDefinition,
};
use serde_json::{Map, Value, json};

use super::schema::SchemaIndex;
use super::state::{BoardSeed, PullSeed, SandboxState, SeedState};
use super::{Caller, ids};

/// A GraphQL request body.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct GqlRequest {
    #[serde(default)]
    pub(crate) query: Option<String>,
    #[serde(default)]
    pub(crate) variables: Option<Value>,
    #[serde(default, rename = "operationName")]
    pub(crate) operation_name: Option<String>,
}

/// The operation to run and its name (for request counts).
pub(crate) fn pick_operation<'d, 'q>(
    doc: &'d Document<'q, &'q str>,
    wanted: Option<&str>,
) -> Result<(&'d OperationDefinition<'q, &'q str>, String), String> {
    let ops: Vec<&OperationDefinition<&str>> = doc
        .definitions
        .iter()
        .filter_map(|d| match d {
            Definition::Operation(op) => Some(op),
            Definition::Fragment(_) => None,
        })
        .collect();
    let name_of = |op: &OperationDefinition<'q, &'q str>| match op {
        OperationDefinition::Query(q) => q.name,
        OperationDefinition::Mutation(m) => m.name,
        OperationDefinition::Subscription(s) => s.name,
        OperationDefinition::SelectionSet(_) => None,
    };
    let op = match wanted.filter(|w| !w.is_empty()) {
        Some(w) => ops
            .into_iter()
            .find(|op| name_of(op) == Some(w))
            .ok_or_else(|| format!("No operation named \"{w}\""))?,
        None if ops.len() == 1 => ops[0],
        None if ops.is_empty() => return Err("No operations in the document".into()),
        None => {
            return Err("An operation name is required when the document has several".into());
        }
    };
    Ok((op, name_of(op).unwrap_or("anonymous").to_string()))
}

/// Objects of the emulated schema.
#[derive(Debug, Clone, PartialEq)]
enum Obj {
    Query,
    Mutation,
    Repository,
    Ref(String),
    Issue(u64),
    Pull(u64),
    Comment(u64),
    Label(String),
    User(String),
    Organization(String),
    Bot(String),
    Project,
    StatusField,
    FieldOption(usize),
    Item(u64),
    ItemValue(u64),
    /// The `index`th title change of issue `issue`.
    Renamed {
        issue: u64,
        index: usize,
    },
    RateLimit,
    /// (pull request, review id)
    Review(u64, u64),
    /// (pull request, id of the thread's first comment)
    Thread(u64, u64),
    /// (pull request, review comment id)
    ReviewComment(u64, u64),
    /// The state of issue `n`'s sub-issues.
    SubIssuesSummary(u64),
    /// The payload of `addSubIssue` / `removeSubIssue`: the parent and the sub-issue.
    SubIssuePayload {
        typename: &'static str,
        client_mutation_id: Option<String>,
        issue: u64,
        sub_issue: u64,
    },
    /// The payload of `resolveReviewThread` / `unresolveReviewThread`.
    ThreadPayload {
        typename: &'static str,
        client_mutation_id: Option<String>,
        thread: (u64, u64),
    },
    Connection {
        typename: &'static str,
        nodes: Vec<Obj>,
        cursors: Vec<String>,
        total: usize,
        has_next: bool,
        has_previous: bool,
    },
    Edge {
        typename: &'static str,
        node: Box<Obj>,
        cursor: String,
    },
    PageInfo {
        has_next: bool,
        has_previous: bool,
        start: Option<String>,
        end: Option<String>,
    },
    Payload {
        typename: &'static str,
        client_mutation_id: Option<String>,
        item: Option<u64>,
    },
}

impl Obj {
    fn typename(&self) -> &'static str {
        match self {
            Obj::Query => "Query",
            Obj::Mutation => "Mutation",
            Obj::Repository => "Repository",
            Obj::Ref(_) => "Ref",
            Obj::Issue(_) => "Issue",
            Obj::Pull(_) => "PullRequest",
            Obj::Comment(_) => "IssueComment",
            Obj::Label(_) => "Label",
            Obj::User(_) => "User",
            Obj::Organization(_) => "Organization",
            Obj::Bot(_) => "Bot",
            Obj::Project => "ProjectV2",
            Obj::StatusField => "ProjectV2SingleSelectField",
            Obj::FieldOption(_) => "ProjectV2SingleSelectFieldOption",
            Obj::Item(_) => "ProjectV2Item",
            Obj::ItemValue(_) => "ProjectV2ItemFieldSingleSelectValue",
            Obj::Renamed { .. } => "RenamedTitleEvent",
            Obj::RateLimit => "RateLimit",
            Obj::Review(..) => "PullRequestReview",
            Obj::Thread(..) => "PullRequestReviewThread",
            Obj::ReviewComment(..) => "PullRequestReviewComment",
            Obj::SubIssuesSummary(_) => "SubIssuesSummary",
            Obj::ThreadPayload { typename, .. } | Obj::SubIssuePayload { typename, .. } => typename,
            Obj::Connection { typename, .. }
            | Obj::Edge { typename, .. }
            | Obj::Payload { typename, .. } => typename,
            Obj::PageInfo { .. } => "PageInfo",
        }
    }
}

/// A resolved field before its sub-selection is applied.
enum Out {
    Null,
    Leaf(Value),
    Obj(Obj),
    List(Vec<Out>),
}

fn leaf(v: impl Into<Value>) -> Result<Out, Fail> {
    Ok(Out::Leaf(v.into()))
}

/// A GraphQL `Int` (32-bit): larger database ids fail as they do on GitHub, whose ids passed 2^31.
fn int(v: u64) -> Result<Out, Fail> {
    match i32::try_from(v) {
        Ok(i) => leaf(i),
        Err(_) => Err(Fail::IntOutOfBounds(v)),
    }
}

/// A GraphQL `BigInt`: a string of digits.
fn big_int(v: u64) -> Result<Out, Fail> {
    leaf(v.to_string())
}

/// GitHub's `DateTime`: ISO 8601 with whole seconds.
fn date_time(t: Option<chrono::DateTime<chrono::Utc>>) -> Result<Out, Fail> {
    leaf(t.map(super::shapes::iso))
}

/// Why a field has no value.
enum Fail {
    /// Not a field of GitHub's type.
    Undefined,
    /// GitHub has it; the sandbox does not emulate it.
    Unsupported,
    /// The token lacks a scope.
    Scope {
        need: &'static str,
    },
    NotFound(String),
    /// Invalid input to a mutation or an argument.
    Invalid(String),
    /// Pagination arguments GitHub refuses.
    Pagination {
        kind: &'static str,
        message: String,
    },
    /// An `Int` field whose value does not fit 32 bits.
    IntOutOfBounds(u64),
    /// An App installation token asked for a board owned by a user.
    AppOnUserBoard,
    /// The caller may not do this (GitHub's `FORBIDDEN`).
    Forbidden(String),
}

type Args = Map<String, Value>;

/// Runs one operation over the state.
pub(crate) struct Exec<'q, 's> {
    state: &'s mut SandboxState,
    base: &'s str,
    caller: &'s Caller,
    vars: Map<String, Value>,
    doc: &'q Document<'q, &'q str>,
    fragments: HashMap<&'q str, &'q FragmentDefinition<'q, &'q str>>,
    errors: Vec<Value>,
    /// Errors GitHub reports instead of any data (validation, scopes).
    fatal_errors: Vec<Value>,
    fatal: bool,
    schema: &'static SchemaIndex,
    /// GitHub's copy of the repository, for commit ids.
    git: Option<&'s super::git::GitRemote>,
}

impl<'q, 's> Exec<'q, 's> {
    pub(super) fn new(
        state: &'s mut SandboxState,
        base: &'s str,
        caller: &'s Caller,
        doc: &'q Document<'q, &'q str>,
        variables: Option<&Value>,
    ) -> Exec<'q, 's> {
        let fragments = crate::github::graphql::fragment_map(doc);
        let vars = variables
            .and_then(|v| v.as_object())
            .cloned()
            .unwrap_or_default();
        Exec {
            state,
            base,
            caller,
            doc,
            vars,
            fragments,
            errors: Vec::new(),
            fatal_errors: Vec::new(),
            fatal: false,
            schema: SchemaIndex::get(),
            git: None,
        }
    }

    /// Answer commit ids from `git`.
    pub(crate) fn with_git(mut self, git: &'s super::git::GitRemote) -> Self {
        self.git = Some(git);
        self
    }

    /// The response body.
    pub(super) fn run(mut self, op: &'q OperationDefinition<'q, &'q str>) -> Value {
        let (root, defs, set): (Obj, &[VariableDefinition<&str>], &SelectionSet<&str>) = match op {
            OperationDefinition::Query(q) => {
                (Obj::Query, &q.variable_definitions, &q.selection_set)
            }
            OperationDefinition::Mutation(m) => {
                (Obj::Mutation, &m.variable_definitions, &m.selection_set)
            }
            OperationDefinition::SelectionSet(s) => (Obj::Query, &[], s),
            OperationDefinition::Subscription(_) => {
                return json!({"errors": [{"message": "Subscriptions are not supported by GitHub's API"}]});
            }
        };
        // As GitHub: a document with arguments or variables of the wrong type does not run at all.
        for error in super::graphql_validate::validate(self.doc, op, &self.vars) {
            self.fatal_error(error);
        }
        for def in defs {
            if self.vars.get(def.name).is_none_or(Value::is_null) {
                match &def.default_value {
                    Some(d) => {
                        let v = self.value(d);
                        self.vars.insert(def.name.to_string(), v);
                    }
                    None if matches!(def.var_type, graphql_parser::query::Type::NonNullType(_)) => {
                        self.fatal_error(json!({
                            "extensions": {"code": "variableMismatch", "variableName": def.name},
                            "locations": [loc(def.position)],
                            "message": format!("Variable ${} of type {} was provided invalid value", def.name, def.var_type),
                        }));
                    }
                    None => {}
                }
            }
        }
        let data = if self.fatal {
            Value::Null
        } else {
            Value::Object(self.select(&root, set, &mut Vec::new()))
        };
        let mut body = Map::new();
        let errors = if self.fatal {
            self.fatal_errors
        } else {
            body.insert("data".into(), data);
            self.errors
        };
        if !errors.is_empty() {
            body.insert("errors".into(), Value::Array(errors));
        }
        Value::Object(body)
    }

    fn value(&self, v: &GqlValue<'q, &'q str>) -> Value {
        match v {
            GqlValue::Variable(name) => self.vars.get(*name).cloned().unwrap_or(Value::Null),
            GqlValue::Int(n) => n.as_i64().map_or(Value::Null, Value::from),
            GqlValue::Float(f) => json!(f),
            GqlValue::String(s) => Value::String(s.clone()),
            GqlValue::Boolean(b) => Value::Bool(*b),
            GqlValue::Null => Value::Null,
            GqlValue::Enum(e) => Value::String(e.to_string()),
            GqlValue::List(items) => Value::Array(items.iter().map(|i| self.value(i)).collect()),
            GqlValue::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.to_string(), self.value(v)))
                    .collect(),
            ),
        }
    }

    fn included(&self, directives: &[Directive<'q, &'q str>]) -> bool {
        directives.iter().all(|d| {
            let cond = d
                .arguments
                .iter()
                .find(|(n, _)| *n == "if")
                .map(|(_, v)| self.value(v).as_bool().unwrap_or(false));
            match (d.name, cond) {
                ("skip", Some(c)) => !c,
                ("include", Some(c)) => c,
                _ => true,
            }
        })
    }

    fn select(
        &mut self,
        obj: &Obj,
        set: &'q SelectionSet<'q, &'q str>,
        path: &mut Vec<Value>,
    ) -> Map<String, Value> {
        let mut out = Map::new();
        let typename = obj.typename();
        for sel in &set.items {
            match sel {
                Selection::Field(f) => {
                    if !self.included(&f.directives) {
                        continue;
                    }
                    let key = f.alias.unwrap_or(f.name);
                    if f.name == "__typename" {
                        out.insert(key.to_string(), Value::String(typename.to_string()));
                        continue;
                    }
                    let args: Args = f
                        .arguments
                        .iter()
                        .map(|(k, v)| (k.to_string(), self.value(v)))
                        .collect();
                    path.push(Value::String(key.to_string()));
                    let value = match self.resolve(obj, f.name, &args) {
                        Ok(o) => {
                            self.complete(o, f.name, typename, &f.selection_set, f.position, path)
                        }
                        Err(fail) => {
                            self.fail(fail, typename, f.name, f.position, path);
                            Value::Null
                        }
                    };
                    path.pop();
                    merge_into(&mut out, key, value);
                }
                Selection::FragmentSpread(s) => {
                    if !self.included(&s.directives) {
                        continue;
                    }
                    let Some(frag) = self.fragments.get(s.fragment_name).copied() else {
                        self.fatal_error(json!({
                            "extensions": {"code": "useAndDefineFragment", "fragmentName": s.fragment_name},
                            "locations": [loc(s.position)],
                            "message": format!("Fragment {} was used, but not defined", s.fragment_name),
                        }));
                        continue;
                    };
                    let TypeCondition::On(cond) = frag.type_condition;
                    if !self.known_type(cond, frag.position) {
                        continue;
                    }
                    if self.schema.matches(typename, cond) {
                        for (k, v) in self.select(obj, &frag.selection_set, path) {
                            merge_into(&mut out, &k, v);
                        }
                    }
                }
                Selection::InlineFragment(i) => {
                    if !self.included(&i.directives) {
                        continue;
                    }
                    let applies = match &i.type_condition {
                        None => true,
                        Some(TypeCondition::On(cond)) => {
                            self.known_type(cond, i.position) && self.schema.matches(typename, cond)
                        }
                    };
                    if applies {
                        for (k, v) in self.select(obj, &i.selection_set, path) {
                            merge_into(&mut out, &k, v);
                        }
                    }
                }
            }
        }
        out
    }

    fn fatal_error(&mut self, error: Value) {
        self.fatal = true;
        self.fatal_errors.push(error);
    }

    /// Whether GitHub has the type a fragment is on; GitHub's error when not.
    fn known_type(&mut self, name: &str, pos: Pos) -> bool {
        if self.schema.has_type(name) {
            return true;
        }
        self.fatal_error(json!({
            "extensions": {"code": "undefinedType", "typeName": name},
            "locations": [loc(pos)],
            "message": format!("No such type {name}, so it can't be a fragment condition"),
        }));
        false
    }

    fn complete(
        &mut self,
        out: Out,
        field: &str,
        parent: &str,
        set: &'q SelectionSet<'q, &'q str>,
        pos: Pos,
        path: &mut Vec<Value>,
    ) -> Value {
        match out {
            Out::Null => Value::Null,
            Out::Leaf(v) => {
                if !set.items.is_empty() {
                    self.fatal_error(json!({
                        "extensions": {"code": "selectionMismatch", "nodeName": format!("field '{field}'")},
                        "locations": [loc(pos)],
                        "path": path.clone(),
                        "message": format!("Selections can't be made on scalars (field '{field}' of '{parent}')"),
                    }));
                }
                v
            }
            Out::Obj(o) => {
                if set.items.is_empty() {
                    self.fatal_error(json!({
                        "extensions": {"code": "selectionMismatch", "nodeName": format!("field '{field}'")},
                        "locations": [loc(pos)],
                        "path": path.clone(),
                        "message": format!("Field must have selections (field '{field}' returns {} but has no selections. Did you mean '{field} {{ ... }}'?)", o.typename()),
                    }));
                    return Value::Null;
                }
                Value::Object(self.select(&o, set, path))
            }
            Out::List(items) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| {
                        path.push(Value::from(i));
                        let v = self.complete(item, field, parent, set, pos, path);
                        path.pop();
                        v
                    })
                    .collect(),
            ),
        }
    }

    fn fail(&mut self, fail: Fail, typename: &str, field: &str, pos: Pos, path: &[Value]) {
        let mut fatal = false;
        let typed = |kind: &str, message: String| json!({"type": kind, "path": path, "locations": [loc(pos)], "message": message});
        let error = match fail {
            Fail::Undefined => {
                fatal = true;
                json!({
                    "path": path,
                    "extensions": {"code": "undefinedField", "typeName": typename, "fieldName": field},
                    "locations": [loc(pos)],
                    "message": format!("Field '{field}' doesn't exist on type '{typename}'"),
                })
            }
            Fail::Unsupported => typed(
                "SANDBOX_UNSUPPORTED",
                format!(
                    "Field '{field}' of type '{typename}' exists on GitHub, but the sandbox does not emulate it"
                ),
            ),
            Fail::Scope { need } => {
                fatal = true;
                let granted = self
                    .caller
                    .scopes()
                    .map(|s| {
                        s.iter()
                            .map(|s| format!("'{s}'"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                json!({
                    "type": "INSUFFICIENT_SCOPES",
                    "locations": [loc(pos)],
                    "message": format!("Your token has not been granted the required scopes to execute this query. The '{field}' field requires one of the following scopes: ['{need}'], but your token has only been granted the: [{granted}] scopes. Please modify your token's scopes at: https://github.com/settings/tokens."),
                })
            }
            Fail::NotFound(message) => typed("NOT_FOUND", message),
            Fail::Invalid(message) => typed("UNPROCESSABLE", message),
            Fail::Pagination { kind, message } => {
                fatal = true;
                typed(kind, message)
            }
            Fail::IntOutOfBounds(v) => json!({
                "path": path,
                "locations": [loc(pos)],
                "message": format!("Integer out of bounds: {v} @ {field} ({typename}.{field}). Consider using ID or GraphQL::Types::BigInt instead."),
            }),
            Fail::AppOnUserBoard => {
                typed("FORBIDDEN", "Resource not accessible by integration".into())
            }
            Fail::Forbidden(message) => typed("FORBIDDEN", message),
        };
        if fatal {
            self.fatal_error(error);
        } else {
            self.errors.push(error);
        }
    }

    /// A field the emulation does not answer: GitHub's error for fields it lacks, else "unsupported".
    fn unknown(&self, obj: &Obj, field: &str) -> Fail {
        if self.schema.has_field(obj.typename(), field) {
            Fail::Unsupported
        } else {
            Fail::Undefined
        }
    }

    fn need_project(&self, write: bool) -> Result<(), Fail> {
        let Some(scopes) = self.caller.scopes() else {
            return Ok(());
        };
        let ok = scopes
            .iter()
            .any(|s| s == "project" || (!write && s == "read:project"));
        if ok {
            Ok(())
        } else {
            Err(Fail::Scope {
                need: if write { "project" } else { "read:project" },
            })
        }
    }

    /// The board, once the caller's scopes may read it.
    fn readable_board(&self) -> Result<Option<&BoardSeed>, Fail> {
        self.need_project(false)?;
        if self.app_kept_off_board() {
            return Err(Fail::AppOnUserBoard);
        }
        Ok(self.state.board.as_ref())
    }

    /// GitHub Apps cannot reach Projects (v2) boards owned by a user, only organizations' boards.
    fn app_kept_off_board(&self) -> bool {
        self.caller.is_app_installation()
            && self
                .state
                .board
                .as_ref()
                .is_some_and(|b| b.owner_type == super::state::OwnerType::User)
    }

    fn resolve(&mut self, obj: &Obj, field: &str, args: &Args) -> Result<Out, Fail> {
        match obj {
            Obj::Query => self.query_field(field, args),
            Obj::Mutation => self.mutation_field(field, args),
            Obj::Repository => self.repository_field(field, args),
            Obj::Ref(name) => match field {
                "name" => leaf(name.clone()),
                "prefix" => leaf("refs/heads/"),
                "id" => leaf(format!("REF_{name}")),
                _ => Err(self.unknown(obj, field)),
            },
            Obj::Issue(n) => self.issue_field(*n, field, args),
            Obj::Pull(n) => self.pull_field(*n, field, args),
            Obj::Comment(id) => self.comment_field(*id, field),
            Obj::Review(n, id) => self.review_field(*n, *id, field),
            Obj::Thread(n, root) => self.thread_field(*n, *root, field, args),
            Obj::ReviewComment(n, id) => self.review_comment_field(*n, *id, field),
            Obj::ThreadPayload {
                client_mutation_id,
                thread,
                ..
            } => match field {
                "clientMutationId" => leaf(client_mutation_id.clone()),
                "thread" => Ok(Out::Obj(Obj::Thread(thread.0, thread.1))),
                _ => Err(self.unknown(obj, field)),
            },
            Obj::SubIssuesSummary(n) => self.sub_issues_summary_field(*n, field),
            Obj::SubIssuePayload {
                client_mutation_id,
                issue,
                sub_issue,
                ..
            } => match field {
                "clientMutationId" => leaf(client_mutation_id.clone()),
                "issue" => Ok(Out::Obj(Obj::Issue(*issue))),
                "subIssue" => Ok(Out::Obj(Obj::Issue(*sub_issue))),
                _ => Err(self.unknown(obj, field)),
            },
            Obj::Label(name) => match field {
                "name" => leaf(name.clone()),
                "id" => leaf(format!("LA_{name}")),
                "color" => leaf("ededed"),
                "description" => Ok(Out::Null),
                _ => Err(self.unknown(obj, field)),
            },
            Obj::User(login) | Obj::Organization(login) | Obj::Bot(login) => {
                self.owner_field(obj, login, field, args)
            }
            Obj::Project => self.project_field(field, args),
            Obj::StatusField => self.status_field_field(field, args),
            Obj::FieldOption(i) => {
                let name = self
                    .state
                    .board
                    .as_ref()
                    .and_then(|b| b.options.get(*i))
                    .cloned()
                    .unwrap_or_default();
                match field {
                    "id" => leaf(ids::option(&name)),
                    "name" | "nameHTML" => leaf(name),
                    "color" => leaf("GRAY"),
                    "description" | "descriptionHTML" => leaf(""),
                    _ => Err(self.unknown(obj, field)),
                }
            }
            Obj::Item(n) => self.item_field(*n, field, args),
            Obj::ItemValue(n) => self.item_value_field(*n, field),
            Obj::Renamed { issue, index } => self.renamed_field(*issue, *index, field),
            Obj::RateLimit => match field {
                "limit" => leaf(5000),
                "cost" => leaf(1),
                "remaining" => leaf(4999),
                "used" => leaf(1),
                "nodeCount" => leaf(1),
                "resetAt" => date_time(Some(chrono::Utc::now() + chrono::Duration::hours(1))),
                _ => Err(self.unknown(obj, field)),
            },
            Obj::Connection {
                typename,
                nodes,
                cursors,
                total,
                has_next,
                has_previous,
            } => match field {
                "nodes" => Ok(Out::List(nodes.iter().cloned().map(Out::Obj).collect())),
                "edges" => Ok(Out::List(
                    nodes
                        .iter()
                        .zip(cursors)
                        .map(|(n, c)| {
                            Out::Obj(Obj::Edge {
                                typename: edge_name(typename),
                                node: Box::new(n.clone()),
                                cursor: c.clone(),
                            })
                        })
                        .collect(),
                )),
                "totalCount" => leaf(*total),
                "pageInfo" => Ok(Out::Obj(Obj::PageInfo {
                    has_next: *has_next,
                    has_previous: *has_previous,
                    start: cursors.first().cloned(),
                    end: cursors.last().cloned(),
                })),
                _ => Err(self.unknown(obj, field)),
            },
            Obj::Edge { node, cursor, .. } => match field {
                "node" => Ok(Out::Obj((**node).clone())),
                "cursor" => leaf(cursor.clone()),
                _ => Err(self.unknown(obj, field)),
            },
            Obj::PageInfo {
                has_next,
                has_previous,
                start,
                end,
            } => match field {
                "hasNextPage" => leaf(*has_next),
                "hasPreviousPage" => leaf(*has_previous),
                "startCursor" => leaf(start.clone()),
                "endCursor" => leaf(end.clone()),
                _ => Err(self.unknown(obj, field)),
            },
            Obj::Payload {
                client_mutation_id,
                item,
                typename,
            } => match (*typename, field) {
                (_, "clientMutationId") => leaf(client_mutation_id.clone()),
                ("CreateProjectV2Payload", "projectV2") => Ok(Out::Obj(Obj::Project)),
                ("LinkProjectV2ToRepositoryPayload", "repository") => Ok(Out::Obj(Obj::Repository)),
                ("UpdateProjectV2FieldPayload", "projectV2Field") => Ok(Out::Obj(Obj::StatusField)),
                (_, "projectV2Item" | "item") => {
                    Ok(item.map_or(Out::Null, |n| Out::Obj(Obj::Item(n))))
                }
                _ => Err(self.unknown(obj, field)),
            },
        }
    }

    fn query_field(&mut self, field: &str, args: &Args) -> Result<Out, Fail> {
        match field {
            "repository" => {
                let owner = arg_str(args, "owner")?;
                let name = arg_str(args, "name")?;
                let repo = &self.state.repo;
                let visible = !repo.private || !self.caller.is_anonymous();
                if visible
                    && repo.owner.eq_ignore_ascii_case(&owner)
                    && repo.name.eq_ignore_ascii_case(&name)
                {
                    Ok(Out::Obj(Obj::Repository))
                } else {
                    Err(Fail::NotFound(format!(
                        "Could not resolve to a Repository with the name '{owner}/{name}'."
                    )))
                }
            }
            "user" => {
                let login = arg_str(args, "login")?;
                match self.owner(&login) {
                    Some(o @ (Obj::User(_) | Obj::Bot(_))) => Ok(Out::Obj(o)),
                    _ => Err(Fail::NotFound(format!(
                        "Could not resolve to a User with the login of '{login}'."
                    ))),
                }
            }
            "organization" => {
                let login = arg_str(args, "login")?;
                match self.owner(&login) {
                    Some(o @ Obj::Organization(_)) => Ok(Out::Obj(o)),
                    _ => Err(Fail::NotFound(format!(
                        "Could not resolve to an Organization with the login of '{login}'."
                    ))),
                }
            }
            "repositoryOwner" => {
                let login = arg_str(args, "login")?;
                Ok(self.owner(&login).map_or(Out::Null, Out::Obj))
            }
            "viewer" => Ok(Out::Obj(match self.caller.login() {
                Some(l) if l.ends_with("[bot]") => Obj::Bot(l.to_string()),
                Some(l) => Obj::User(l.to_string()),
                None => Obj::User(self.state.repo.owner.clone()),
            })),
            "node" => {
                let id = arg_str(args, "id")?;
                self.node(&id).map(Out::Obj).ok_or_else(|| {
                    Fail::NotFound(format!(
                        "Could not resolve to a node with the global id of '{id}'"
                    ))
                })
            }
            "rateLimit" => Ok(Out::Obj(Obj::RateLimit)),
            _ => Err(self.unknown(&Obj::Query, field)),
        }
    }

    fn owner(&self, login: &str) -> Option<Obj> {
        if self.state.is_org(login) {
            let canonical = if self.state.repo.owner.eq_ignore_ascii_case(login) {
                self.state.repo.owner.clone()
            } else {
                self.state
                    .board
                    .as_ref()
                    .map_or(login.to_string(), |b| b.owner.clone())
            };
            Some(Obj::Organization(canonical))
        } else if login.ends_with("[bot]") {
            Some(Obj::Bot(login.to_string()))
        } else if self.state.is_user(login) {
            Some(Obj::User(login.to_string()))
        } else {
            None
        }
    }

    fn author(&self, login: &str) -> Out {
        Out::Obj(if login.ends_with("[bot]") {
            Obj::Bot(login.to_string())
        } else {
            Obj::User(login.to_string())
        })
    }

    fn node(&self, id: &str) -> Option<Obj> {
        let (kind, rest) = id.split_once('_')?;
        let number = || rest.parse::<u64>().ok();
        match kind {
            "R" => Some(Obj::Repository),
            "I" => number()
                .filter(|n| self.state.issue(*n).is_some())
                .map(Obj::Issue),
            "PR" => number()
                .filter(|n| self.state.pull(*n).is_some())
                .map(Obj::Pull),
            "PRR" => number().and_then(|id| {
                let p = self
                    .state
                    .pulls
                    .iter()
                    .find(|p| p.reviews.iter().any(|r| r.id == id))?;
                Some(Obj::Review(p.number, id))
            }),
            "PRRT" => number().and_then(|id| {
                let p = self.state.pull_of_review_comment(id)?;
                (p.thread_root(id)?.id == id).then_some(Obj::Thread(p.number, id))
            }),
            "PRRC" => number().and_then(|id| {
                let p = self.state.pull_of_review_comment(id)?;
                Some(Obj::ReviewComment(p.number, id))
            }),
            "IC" => number()
                .filter(|id| self.comment(*id).is_some())
                .map(Obj::Comment),
            "U" | "O" => self.owner(rest),
            "PVT" => self
                .state
                .board
                .as_ref()
                .filter(|b| ids::project(b.number) == id)
                .map(|_| Obj::Project),
            "PVTSSF" => self
                .state
                .board
                .as_ref()
                .filter(|b| ids::status_field(b.number) == id)
                .map(|_| Obj::StatusField),
            "PVTI" => number().filter(|n| self.state.on_board(*n)).map(Obj::Item),
            _ => None,
        }
    }

    fn comment(&self, id: u64) -> Option<(u64, &super::state::CommentSeed)> {
        let (n, pos) = self.state.find_comment(id)?;
        Some((n, &self.state.comments_of(n)[pos]))
    }

    fn repository_field(&mut self, field: &str, args: &Args) -> Result<Out, Fail> {
        let repo = &self.state.repo;
        match field {
            "id" => leaf(ids::REPO),
            "name" => leaf(repo.name.clone()),
            "nameWithOwner" => leaf(format!("{}/{}", repo.owner, repo.name)),
            "owner" => Ok(self.owner(&repo.owner.clone()).map_or(Out::Null, Out::Obj)),
            "url" => leaf(format!("{}/{}/{}", self.base, repo.owner, repo.name)),
            "isPrivate" => leaf(repo.private),
            "defaultBranchRef" => Ok(Out::Obj(Obj::Ref(repo.default_branch.clone()))),
            "viewerPermission" => leaf(self.caller.role(self.state).to_ascii_uppercase()),
            "issue" | "pullRequest" | "issueOrPullRequest" => {
                let n = arg_u64(args, "number")?;
                let issue = self.state.issue(n).map(|_| Obj::Issue(n));
                let pull = self.state.pull(n).map(|_| Obj::Pull(n));
                let (found, what) = match field {
                    "issue" => (issue, "an Issue"),
                    "pullRequest" => (pull, "a PullRequest"),
                    _ => (issue.or(pull), "an issue or pull request"),
                };
                found.map(Out::Obj).ok_or_else(|| {
                    Fail::NotFound(format!(
                        "Could not resolve to {what} with the number of {n}."
                    ))
                })
            }
            _ => Err(self.unknown(&Obj::Repository, field)),
        }
    }

    fn issue_field(&mut self, n: u64, field: &str, args: &Args) -> Result<Out, Fail> {
        let Some(issue) = self.state.issue(n) else {
            return Ok(Out::Null);
        };
        let closed = issue.state == SeedState::Closed;
        let (created, updated) = (issue.created_at, issue.updated_at.or(issue.created_at));
        let edited = issue.editor.is_some();
        match field {
            "id" => leaf(ids::issue(n)),
            "number" => leaf(n),
            "databaseId" => int(ids::issue_id(n)),
            "fullDatabaseId" => big_int(ids::issue_id(n)),
            "title" => leaf(issue.title.clone()),
            "body" | "bodyText" => leaf(issue.body.clone()),
            "state" => leaf(if closed { "CLOSED" } else { "OPEN" }),
            "closed" => leaf(closed),
            "url" => leaf(format!(
                "{}/{}/{}/issues/{n}",
                self.base, self.state.repo.owner, self.state.repo.name
            )),
            "author" => Ok(self.author(&issue.author.clone())),
            "editor" => Ok(issue.editor.clone().map_or(Out::Null, |e| self.author(&e))),
            "createdAt" => date_time(created),
            "updatedAt" => date_time(updated),
            "lastEditedAt" => date_time(updated.filter(|_| edited)),
            "repository" => Ok(Out::Obj(Obj::Repository)),
            "timelineItems" => {
                let renames = issue.renames.len();
                self.timeline(n, renames, field, args)
            }
            "labels" => {
                let labels = issue.labels.clone();
                self.connection(
                    "LabelConnection",
                    field,
                    labels.into_iter().map(Obj::Label).collect(),
                    args,
                )
            }
            "comments" => {
                let comments = issue.comments.iter().map(|c| Obj::Comment(c.id)).collect();
                self.connection("IssueCommentConnection", field, comments, args)
            }
            "projectItems" => self.project_items(n, field, args),
            "subIssues" => {
                let nodes = issue.sub_issues.iter().copied().map(Obj::Issue).collect();
                self.connection("IssueConnection", field, nodes, args)
            }
            "parent" => Ok(self
                .state
                .parent_of(n)
                .map_or(Out::Null, |p| Out::Obj(Obj::Issue(p)))),
            "subIssuesSummary" => Ok(Out::Obj(Obj::SubIssuesSummary(n))),
            _ => Err(self.unknown(&Obj::Issue(n), field)),
        }
    }

    /// `SubIssuesSummary`: how many sub-issues issue `n` has, how many are closed, and that share
    /// in whole percent (rounded down; 0 without sub-issues).
    fn sub_issues_summary_field(&mut self, n: u64, field: &str) -> Result<Out, Fail> {
        let subs = self.state.issue(n).map(|i| i.sub_issues.clone());
        let subs = subs.unwrap_or_default();
        let total = subs.len() as u64;
        let completed = (subs.iter())
            .filter(|s| {
                self.state
                    .issue(**s)
                    .is_some_and(|i| i.state == SeedState::Closed)
            })
            .count() as u64;
        match field {
            "total" => int(total),
            "completed" => int(completed),
            "percentCompleted" => int((completed * 100).checked_div(total).unwrap_or(0)),
            _ => Err(self.unknown(&Obj::SubIssuesSummary(n), field)),
        }
    }

    /// An issue's timeline; the sandbox records title changes only, so it answers queries that ask
    /// for `RENAMED_TITLE_EVENT` items alone.
    fn timeline(&mut self, n: u64, renames: usize, field: &str, args: &Args) -> Result<Out, Fail> {
        let only_renames = args
            .get("itemTypes")
            .and_then(|v| v.as_array())
            .is_some_and(|types| {
                !types.is_empty() && types.iter().all(|t| t == "RENAMED_TITLE_EVENT")
            });
        if !only_renames {
            return Err(Fail::Unsupported);
        }
        let nodes = (0..renames)
            .map(|index| Obj::Renamed { issue: n, index })
            .collect();
        self.connection("IssueTimelineItemsConnection", field, nodes, args)
    }

    fn renamed_field(&mut self, n: u64, index: usize, field: &str) -> Result<Out, Fail> {
        let Some(r) = self
            .state
            .issue(n)
            .and_then(|i| i.renames.get(index))
            .cloned()
        else {
            return Ok(Out::Null);
        };
        match field {
            "id" => leaf(format!("RTE_{n}_{index}")),
            "actor" => Ok(self.author(&r.actor)),
            "createdAt" => date_time(r.created_at),
            "previousTitle" => leaf(r.from),
            "currentTitle" => leaf(r.to),
            "subject" => Ok(Out::Obj(Obj::Issue(n))),
            _ => Err(self.unknown(&Obj::Renamed { issue: n, index }, field)),
        }
    }

    fn project_items(&mut self, n: u64, field: &str, args: &Args) -> Result<Out, Fail> {
        self.need_project(false)?;
        let nodes = if self.state.on_board(n) && !self.app_kept_off_board() {
            vec![Obj::Item(n)]
        } else {
            Vec::new()
        };
        self.connection("ProjectV2ItemConnection", field, nodes, args)
    }

    fn pull_field(&mut self, n: u64, field: &str, args: &Args) -> Result<Out, Fail> {
        let Some(pr) = self.state.pull(n).cloned() else {
            return Ok(Out::Null);
        };
        let PullSeed {
            head,
            base,
            title,
            body,
            state,
            draft,
            merged,
            author,
            created_at,
            editor,
            comments,
            reviews,
            review_comments,
            ..
        } = pr;
        match field {
            "id" => leaf(ids::pull(n)),
            "number" => leaf(n),
            "databaseId" => int(ids::pull_id(n)),
            "fullDatabaseId" => big_int(ids::pull_id(n)),
            "title" => leaf(title),
            "body" => leaf(body),
            "state" => leaf(match (merged, state) {
                (true, _) => "MERGED",
                (false, SeedState::Closed) => "CLOSED",
                (false, SeedState::Open) => "OPEN",
            }),
            "closed" => leaf(merged || state == SeedState::Closed),
            "merged" => leaf(merged),
            "isDraft" => leaf(draft),
            "headRefName" => leaf(head),
            "baseRefName" => leaf(base),
            "url" => leaf(format!(
                "{}/{}/{}/pull/{n}",
                self.base, self.state.repo.owner, self.state.repo.name
            )),
            "author" => Ok(self.author(&author)),
            "editor" => Ok(editor.map_or(Out::Null, |e| self.author(&e))),
            "createdAt" | "updatedAt" => date_time(created_at),
            "repository" => Ok(Out::Obj(Obj::Repository)),
            "projectItems" => self.project_items(n, field, args),
            "headRefOid" => leaf(self.git_sha(&head)),
            "baseRefOid" => leaf(self.git_sha(&base)),
            "comments" => {
                let nodes = comments.iter().map(|c| Obj::Comment(c.id)).collect();
                self.connection("IssueCommentConnection", field, nodes, args)
            }
            "reviews" => {
                let states: Option<Vec<String>> = args.get("states").and_then(|v| {
                    v.as_array().map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str().map(str::to_string))
                            .collect()
                    })
                });
                let nodes = reviews
                    .iter()
                    .filter(|r| states.as_ref().is_none_or(|s| s.contains(&r.state)))
                    .map(|r| Obj::Review(n, r.id))
                    .collect();
                self.connection("PullRequestReviewConnection", field, nodes, args)
            }
            "reviewThreads" => {
                let nodes = review_comments
                    .iter()
                    .filter(|c| c.in_reply_to.is_none())
                    .map(|c| Obj::Thread(n, c.id))
                    .collect();
                self.connection("PullRequestReviewThreadConnection", field, nodes, args)
            }
            _ => Err(self.unknown(&Obj::Pull(n), field)),
        }
    }

    fn comment_field(&mut self, id: u64, field: &str) -> Result<Out, Fail> {
        let Some((issue, c)) = self.comment(id) else {
            return Ok(Out::Null);
        };
        let (author, body, created, editor) = (
            c.author.clone(),
            c.body.clone(),
            c.created_at,
            c.editor.clone(),
        );
        let updated = c.updated_at.or(created);
        match field {
            "id" => leaf(ids::comment(id)),
            "databaseId" => int(id),
            "fullDatabaseId" => big_int(id),
            "body" | "bodyText" => leaf(body),
            "author" => Ok(self.author(&author)),
            "editor" => Ok(editor.map_or(Out::Null, |e| self.author(&e))),
            "createdAt" => date_time(created),
            "updatedAt" => date_time(updated),
            "lastEditedAt" => date_time(updated.filter(|_| editor.is_some())),
            "url" => leaf(format!(
                "{}/{}/{}/issues/{issue}#issuecomment-{id}",
                self.base, self.state.repo.owner, self.state.repo.name
            )),
            "issue" => Ok(Out::Obj(Obj::Issue(issue))),
            _ => Err(self.unknown(&Obj::Comment(id), field)),
        }
    }

    fn git_sha(&self, branch: &str) -> Option<String> {
        self.git.and_then(|g| g.branch_sha(branch))
    }

    /// Where line comment `c` stands on the pull request's head now (`None`: outdated).
    fn line_now(&self, p: &PullSeed, c: &super::state::ReviewCommentSeed) -> Option<u64> {
        match self.git {
            Some(git) => super::shapes::current_line(git, p, c),
            None => c.line,
        }
    }

    /// Whether the caller may resolve (and unresolve) the review threads of `p`: GitHub lets the
    /// pull request's author and those with write access.
    fn may_resolve(&self, p: &PullSeed) -> bool {
        let author = self
            .caller
            .login()
            .is_some_and(|l| l.eq_ignore_ascii_case(&p.author));
        author || self.caller.may_write(self.state, "pull_requests")
    }

    fn review_field(&mut self, n: u64, id: u64, field: &str) -> Result<Out, Fail> {
        let Some(r) = self
            .state
            .pull(n)
            .and_then(|p| p.reviews.iter().find(|r| r.id == id))
            .cloned()
        else {
            return Ok(Out::Null);
        };
        match field {
            "id" => leaf(format!("PRR_{id}")),
            "databaseId" => int(id),
            "fullDatabaseId" => big_int(id),
            "state" => leaf(r.state),
            "body" | "bodyText" => leaf(r.body),
            "author" => Ok(self.author(&r.author)),
            "editor" => Ok(r.editor.map_or(Out::Null, |e| self.author(&e))),
            "submittedAt" | "createdAt" | "updatedAt" => date_time(r.submitted_at),
            "url" => leaf(format!(
                "{}/{}/{}/pull/{n}#pullrequestreview-{id}",
                self.base, self.state.repo.owner, self.state.repo.name
            )),
            "pullRequest" => Ok(Out::Obj(Obj::Pull(n))),
            _ => Err(self.unknown(&Obj::Review(n, id), field)),
        }
    }

    fn thread_field(&mut self, n: u64, root: u64, field: &str, args: &Args) -> Result<Out, Fail> {
        let Some(p) = self.state.pull(n).cloned() else {
            return Ok(Out::Null);
        };
        let Some(first) = p.review_comments.iter().find(|c| c.id == root).cloned() else {
            return Ok(Out::Null);
        };
        let line = self.line_now(&p, &first);
        match field {
            "id" => leaf(format!("PRRT_{root}")),
            "isResolved" => leaf(first.resolved_by.is_some()),
            "isOutdated" => leaf(first.line.is_some() && line.is_none()),
            "isCollapsed" => leaf(first.resolved_by.is_some()),
            "path" => leaf(first.path),
            "line" => leaf(line),
            "originalLine" => leaf(first.line),
            "diffSide" => leaf("RIGHT"),
            "subjectType" => leaf("LINE"),
            "resolvedBy" => Ok(first.resolved_by.map_or(Out::Null, |e| self.author(&e))),
            "viewerCanResolve" => leaf(first.resolved_by.is_none() && self.may_resolve(&p)),
            "viewerCanUnresolve" => leaf(first.resolved_by.is_some() && self.may_resolve(&p)),
            "viewerCanReply" => leaf(self.caller.login().is_some()),
            "pullRequest" => Ok(Out::Obj(Obj::Pull(n))),
            "repository" => Ok(Out::Obj(Obj::Repository)),
            "comments" => {
                let nodes = p
                    .thread(root)
                    .iter()
                    .map(|c| Obj::ReviewComment(n, c.id))
                    .collect();
                self.connection("PullRequestReviewCommentConnection", field, nodes, args)
            }
            _ => Err(self.unknown(&Obj::Thread(n, root), field)),
        }
    }

    fn review_comment_field(&mut self, n: u64, id: u64, field: &str) -> Result<Out, Fail> {
        let Some(p) = self.state.pull(n).cloned() else {
            return Ok(Out::Null);
        };
        let Some(c) = p.review_comments.iter().find(|c| c.id == id).cloned() else {
            return Ok(Out::Null);
        };
        let line = self.line_now(&p, &c);
        match field {
            "id" => leaf(format!("PRRC_{id}")),
            "databaseId" => int(id),
            "fullDatabaseId" => big_int(id),
            "body" | "bodyText" => leaf(c.body),
            "author" => Ok(self.author(&c.author)),
            "editor" => Ok(c.editor.map_or(Out::Null, |e| self.author(&e))),
            "path" => leaf(c.path),
            "line" => leaf(line),
            "originalLine" => leaf(c.line),
            "diffHunk" => leaf(c.diff_hunk),
            "createdAt" | "updatedAt" | "publishedAt" => date_time(c.created_at),
            "url" => leaf(format!(
                "{}/{}/{}/pull/{n}#discussion_r{id}",
                self.base, self.state.repo.owner, self.state.repo.name
            )),
            "replyTo" => Ok(c
                .in_reply_to
                .map_or(Out::Null, |r| Out::Obj(Obj::ReviewComment(n, r)))),
            "pullRequestReview" => Ok(c
                .review_id
                .map_or(Out::Null, |r| Out::Obj(Obj::Review(n, r)))),
            "pullRequest" => Ok(Out::Obj(Obj::Pull(n))),
            "outdated" => leaf(c.line.is_some() && line.is_none()),
            _ => Err(self.unknown(&Obj::ReviewComment(n, id), field)),
        }
    }

    fn owner_field(
        &mut self,
        obj: &Obj,
        login: &str,
        field: &str,
        args: &Args,
    ) -> Result<Out, Fail> {
        let board_here = self
            .state
            .board
            .as_ref()
            .filter(|b| b.owner.eq_ignore_ascii_case(login))
            .map(|b| b.number);
        match field {
            "id" => leaf(match obj {
                Obj::Organization(_) => format!("O_{login}"),
                _ => format!("U_{login}"),
            }),
            "login" => leaf(login.to_string()),
            "name" => leaf(
                self.state
                    .users
                    .iter()
                    .find(|u| u.login.eq_ignore_ascii_case(login))
                    .and_then(|u| u.name.clone()),
            ),
            "url" => leaf(format!("{}/{login}", self.base)),
            "projectV2" | "projectsV2"
                if matches!(obj, Obj::User(_)) && self.caller.is_app_installation() =>
            {
                Err(Fail::AppOnUserBoard)
            }
            "projectV2" if !matches!(obj, Obj::Bot(_)) => {
                self.need_project(false)?;
                let number = arg_u64(args, "number")?;
                if board_here == Some(number) {
                    Ok(Out::Obj(Obj::Project))
                } else {
                    Err(Fail::NotFound(format!(
                        "Could not resolve to a ProjectV2 with the number {number}."
                    )))
                }
            }
            "projectsV2" if !matches!(obj, Obj::Bot(_)) => {
                self.need_project(false)?;
                let nodes = board_here.map(|_| Obj::Project).into_iter().collect();
                self.connection("ProjectV2Connection", field, nodes, args)
            }
            _ => Err(self.unknown(obj, field)),
        }
    }

    fn project_field(&mut self, field: &str, args: &Args) -> Result<Out, Fail> {
        let Some(board) = self.readable_board()? else {
            return Ok(Out::Null);
        };
        match field {
            "id" => leaf(ids::project(board.number)),
            "number" => leaf(board.number),
            "title" => leaf(board.title.clone()),
            "url" => leaf(format!(
                "{}/orgs/{}/projects/{}",
                self.base, board.owner, board.number
            )),
            "closed" | "public" | "template" => leaf(false),
            "shortDescription" | "readme" => Ok(Out::Null),
            "owner" => Ok(self.owner(&board.owner).map_or(Out::Null, Out::Obj)),
            "field" => {
                let name = arg_str(args, "name")?;
                Ok(if name == board.status_field {
                    Out::Obj(Obj::StatusField)
                } else {
                    Out::Null
                })
            }
            "fields" => self.connection(
                "ProjectV2FieldConfigurationConnection",
                field,
                vec![Obj::StatusField],
                args,
            ),
            "items" => {
                let nodes = board.items.keys().map(|n| Obj::Item(*n)).collect();
                self.connection("ProjectV2ItemConnection", field, nodes, args)
            }
            _ => Err(self.unknown(&Obj::Project, field)),
        }
    }

    fn status_field_field(&mut self, field: &str, args: &Args) -> Result<Out, Fail> {
        let Some(board) = self.readable_board()? else {
            return Ok(Out::Null);
        };
        match field {
            "id" => leaf(ids::status_field(board.number)),
            "name" => leaf(board.status_field.clone()),
            "dataType" => leaf("SINGLE_SELECT"),
            "project" => Ok(Out::Obj(Obj::Project)),
            "options" => {
                let names: Option<Vec<String>> =
                    args.get("names").and_then(|v| v.as_array()).map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    });
                Ok(Out::List(
                    board
                        .options
                        .iter()
                        .enumerate()
                        .filter(|(_, o)| names.as_ref().is_none_or(|n| n.contains(o)))
                        .map(|(i, _)| Out::Obj(Obj::FieldOption(i)))
                        .collect(),
                ))
            }
            _ => Err(self.unknown(&Obj::StatusField, field)),
        }
    }

    fn item_field(&mut self, n: u64, field: &str, args: &Args) -> Result<Out, Fail> {
        let Some(board) = self.readable_board()? else {
            return Ok(Out::Null);
        };
        let has_value = board.items.get(&n).is_some_and(|c| c.is_some());
        match field {
            "id" => leaf(ids::item(n)),
            "type" => leaf(if self.state.pull(n).is_some() {
                "PULL_REQUEST"
            } else {
                "ISSUE"
            }),
            "isArchived" => leaf(false),
            "project" => Ok(Out::Obj(Obj::Project)),
            "content" => Ok(if self.state.issue(n).is_some() {
                Out::Obj(Obj::Issue(n))
            } else if self.state.pull(n).is_some() {
                Out::Obj(Obj::Pull(n))
            } else {
                Out::Null
            }),
            "fieldValueByName" => {
                let name = arg_str(args, "name")?;
                Ok(if name == board.status_field && has_value {
                    Out::Obj(Obj::ItemValue(n))
                } else {
                    Out::Null
                })
            }
            "fieldValues" => {
                let nodes = if has_value {
                    vec![Obj::ItemValue(n)]
                } else {
                    Vec::new()
                };
                self.connection("ProjectV2ItemFieldValueConnection", field, nodes, args)
            }
            "createdAt" | "updatedAt" => date_time(Some(chrono::Utc::now())),
            "databaseId" => int(n),
            "fullDatabaseId" => big_int(n),
            _ => Err(self.unknown(&Obj::Item(n), field)),
        }
    }

    fn item_value_field(&mut self, n: u64, field: &str) -> Result<Out, Fail> {
        let column = self.state.column_of(n).map(str::to_string);
        match field {
            "id" => leaf(format!("PVTFSV_{n}")),
            "name" | "nameHTML" => leaf(column),
            "optionId" => leaf(column.as_deref().map(ids::option)),
            "field" => Ok(Out::Obj(Obj::StatusField)),
            "item" => Ok(Out::Obj(Obj::Item(n))),
            "color" => leaf("GRAY"),
            "description" | "descriptionHTML" => leaf(""),
            "createdAt" | "updatedAt" => date_time(Some(chrono::Utc::now())),
            _ => Err(self.unknown(&Obj::ItemValue(n), field)),
        }
    }

    fn mutation_field(&mut self, field: &str, args: &Args) -> Result<Out, Fail> {
        let input = args
            .get("input")
            .and_then(|v| v.as_object())
            .cloned()
            .unwrap_or_default();
        let client_mutation_id = input
            .get("clientMutationId")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        match field {
            "updateProjectV2ItemFieldValue" => {
                self.need_project(true)?;
                if self.app_kept_off_board() {
                    return Err(Fail::AppOnUserBoard);
                }
                let project = arg_str(&input, "projectId")?;
                let item = arg_str(&input, "itemId")?;
                let field_id = arg_str(&input, "fieldId")?;
                let board = self.state.board.clone().ok_or_else(|| no_node(&project))?;
                if project != ids::project(board.number) {
                    return Err(no_node(&project));
                }
                let n = item
                    .strip_prefix("PVTI_")
                    .and_then(|n| n.parse::<u64>().ok())
                    .filter(|n| board.items.contains_key(n))
                    .ok_or_else(|| no_node(&item))?;
                if field_id != ids::status_field(board.number) {
                    return Err(no_node(&field_id));
                }
                let value = input
                    .get("value")
                    .and_then(|v| v.as_object())
                    .cloned()
                    .unwrap_or_default();
                let Some(option) = value.get("singleSelectOptionId").and_then(|v| v.as_str())
                else {
                    return Err(Fail::Invalid(
                        "The field is a single select field: set `value: {singleSelectOptionId: ...}`".into(),
                    ));
                };
                let Some(name) = board.options.iter().find(|o| ids::option(o) == option) else {
                    return Err(Fail::Invalid(format!(
                        "The single select option Id '{option}' does not belong to the field"
                    )));
                };
                if let Some(b) = self.state.board.as_mut() {
                    b.items.insert(n, Some(name.clone()));
                }
                Ok(Out::Obj(Obj::Payload {
                    typename: "UpdateProjectV2ItemFieldValuePayload",
                    client_mutation_id,
                    item: Some(n),
                }))
            }
            "addProjectV2ItemById" => {
                self.need_project(true)?;
                if self.app_kept_off_board() {
                    return Err(Fail::AppOnUserBoard);
                }
                let project = arg_str(&input, "projectId")?;
                let content = arg_str(&input, "contentId")?;
                let number = self.state.board.as_ref().map(|b| b.number);
                if number.map(ids::project).as_deref() != Some(project.as_str()) {
                    return Err(no_node(&project));
                }
                let n = match self.node(&content) {
                    Some(Obj::Issue(n) | Obj::Pull(n)) => n,
                    _ => return Err(no_node(&content)),
                };
                if let Some(b) = self.state.board.as_mut() {
                    b.items.entry(n).or_insert(None);
                }
                Ok(Out::Obj(Obj::Payload {
                    typename: "AddProjectV2ItemByIdPayload",
                    client_mutation_id,
                    item: Some(n),
                }))
            }
            "createProjectV2" => self.create_project(&input, client_mutation_id),
            "linkProjectV2ToRepository" => {
                self.need_project(true)?;
                let project = arg_str(&input, "projectId")?;
                let repository = arg_str(&input, "repositoryId")?;
                if !matches!(self.node(&project), Some(Obj::Project)) {
                    return Err(no_node(&project));
                }
                if repository != ids::REPO {
                    return Err(no_node(&repository));
                }
                Ok(Out::Obj(Obj::Payload {
                    typename: "LinkProjectV2ToRepositoryPayload",
                    client_mutation_id,
                    item: None,
                }))
            }
            "updateProjectV2Field" => self.update_field(&input, client_mutation_id),
            "addSubIssue" | "removeSubIssue" => {
                self.sub_issue_mutation(field, &input, client_mutation_id)
            }
            "resolveReviewThread" | "unresolveReviewThread" => {
                let id = arg_str(&input, "threadId")?;
                let Some(Obj::Thread(n, root)) = self.node(&id) else {
                    return Err(no_node(&id));
                };
                let Some(login) = self.caller.login().map(str::to_string) else {
                    return Err(Fail::Invalid(
                        "You must be signed in to resolve a thread".into(),
                    ));
                };
                let may = self.state.pull(n).is_some_and(|p| self.may_resolve(p));
                if !may {
                    return Err(Fail::Forbidden(if self.caller.is_app_installation() {
                        "Resource not accessible by integration".into()
                    } else {
                        let mut op = field.to_string();
                        op[..1].make_ascii_uppercase();
                        format!("{login} does not have the correct permissions to execute `{op}`")
                    }));
                }
                let resolve = field == "resolveReviewThread";
                if let Some(c) = self
                    .state
                    .pull_mut(n)
                    .and_then(|p| p.review_comments.iter_mut().find(|c| c.id == root))
                {
                    c.resolved_by = resolve.then_some(login);
                }
                Ok(Out::Obj(Obj::ThreadPayload {
                    typename: if resolve {
                        "ResolveReviewThreadPayload"
                    } else {
                        "UnresolveReviewThreadPayload"
                    },
                    client_mutation_id,
                    thread: (n, root),
                }))
            }
            _ => Err(self.unknown(&Obj::Mutation, field)),
        }
    }

    /// `addSubIssue` (the sub-issue named by `subIssueId` or `subIssueUrl`; `replaceParent` moves
    /// one that has a parent) and `removeSubIssue`, under the rules and the permission the REST
    /// routes have.
    fn sub_issue_mutation(
        &mut self,
        field: &str,
        input: &Args,
        client_mutation_id: Option<String>,
    ) -> Result<Out, Fail> {
        if let Some(by) = self.caller.lacks("issues", "write") {
            return Err(Fail::Forbidden(format!("Resource not accessible by {by}")));
        }
        let parent = self.issue_node(&arg_str(input, "issueId")?)?;
        let child = match (
            input.get("subIssueId").and_then(Value::as_str),
            input.get("subIssueUrl").and_then(Value::as_str),
        ) {
            (Some(id), _) => self.issue_node(id)?,
            (None, Some(url)) if field == "addSubIssue" => self.issue_at(url)?,
            (None, _) if field == "addSubIssue" => {
                return Err(Fail::Invalid(
                    "Give subIssueId or subIssueUrl: the sub-issue's node id or its URL".into(),
                ));
            }
            (None, _) => return Err(Fail::Invalid("Argument 'subIssueId' is missing".into())),
        };
        let done = if field == "addSubIssue" {
            let replace = input.get("replaceParent").and_then(Value::as_bool) == Some(true);
            self.state.add_sub_issue(parent, child, replace)
        } else {
            self.state.remove_sub_issue(parent, child)
        };
        done.map_err(Fail::Invalid)?;
        Ok(Out::Obj(Obj::SubIssuePayload {
            typename: if field == "addSubIssue" {
                "AddSubIssuePayload"
            } else {
                "RemoveSubIssuePayload"
            },
            client_mutation_id,
            issue: parent,
            sub_issue: child,
        }))
    }

    /// The number of the issue of node id `id`.
    fn issue_node(&self, id: &str) -> Result<u64, Fail> {
        match self.node(id) {
            Some(Obj::Issue(n)) => Ok(n),
            _ => Err(no_node(id)),
        }
    }

    /// The number of the repository's issue at `url` (`…/{owner}/{repo}/issues/{number}`).
    fn issue_at(&self, url: &str) -> Result<u64, Fail> {
        let parsed = url::Url::parse(url).ok();
        let segments: Vec<&str> = parsed
            .as_ref()
            .and_then(|u| u.path_segments())
            .map(|s| s.filter(|p| !p.is_empty()).collect())
            .unwrap_or_default();
        let repo = &self.state.repo;
        match segments[..] {
            [owner, name, "issues", number]
                if owner.eq_ignore_ascii_case(&repo.owner)
                    && name.eq_ignore_ascii_case(&repo.name) =>
            {
                number
                    .parse::<u64>()
                    .ok()
                    .filter(|n| self.state.issue(*n).is_some())
            }
            _ => None,
        }
        .ok_or_else(|| {
            Fail::NotFound(format!(
                "Could not resolve to an Issue with the URL of '{url}'"
            ))
        })
    }

    /// `createProjectV2`: a board with GitHub's default Status field (Todo, In Progress, Done),
    /// linked to the repository when `repositoryId` is given. The sandbox holds one board.
    fn create_project(
        &mut self,
        input: &Args,
        client_mutation_id: Option<String>,
    ) -> Result<Out, Fail> {
        self.need_project(true)?;
        let owner_id = arg_str(input, "ownerId")?;
        let title = arg_str(input, "title")?;
        if title.trim().is_empty() {
            return Err(Fail::Invalid("Title can't be blank".into()));
        }
        let (owner, owner_type) = match self.node(&owner_id) {
            Some(Obj::Organization(l)) => (l, super::state::OwnerType::Organization),
            Some(Obj::User(l)) => (l, super::state::OwnerType::User),
            _ => return Err(no_node(&owner_id)),
        };
        if let Some(repository) = input.get("repositoryId").and_then(|v| v.as_str()) {
            if repository != ids::REPO {
                return Err(no_node(repository));
            }
        }
        if self.state.board.is_some() {
            return Err(Fail::Invalid(
                "the sandbox holds one board, and it has one already".into(),
            ));
        }
        self.state.board = Some(BoardSeed {
            owner,
            owner_type,
            number: 1,
            title,
            status_field: "Status".into(),
            options: vec!["Todo".into(), "In Progress".into(), "Done".into()],
            items: Default::default(),
        });
        Ok(Out::Obj(Obj::Payload {
            typename: "CreateProjectV2Payload",
            client_mutation_id,
            item: None,
        }))
    }

    /// `updateProjectV2Field` on the status field: new options replace the whole list, as on
    /// GitHub; a card whose option is gone is left without a column.
    fn update_field(
        &mut self,
        input: &Args,
        client_mutation_id: Option<String>,
    ) -> Result<Out, Fail> {
        self.need_project(true)?;
        let field_id = arg_str(input, "fieldId")?;
        if !matches!(self.node(&field_id), Some(Obj::StatusField)) {
            return Err(no_node(&field_id));
        }
        let options = input
            .get("singleSelectOptions")
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default();
        let mut names = Vec::new();
        for o in &options {
            let name = o.get("name").and_then(|v| v.as_str()).unwrap_or_default();
            let color = o.get("color").and_then(|v| v.as_str());
            let description = o.get("description").and_then(|v| v.as_str());
            if name.trim().is_empty() || color.is_none() || description.is_none() {
                return Err(Fail::Invalid(
                    "Each single select option needs a name, a color and a description".into(),
                ));
            }
            if names.iter().any(|n: &String| n.eq_ignore_ascii_case(name)) {
                return Err(Fail::Invalid(format!("Option name '{name}' is duplicated")));
            }
            names.push(name.to_string());
        }
        if let (false, Some(board)) = (names.is_empty(), self.state.board.as_mut()) {
            for column in board.items.values_mut() {
                if column.as_ref().is_some_and(|c| !names.contains(c)) {
                    *column = None;
                }
            }
            board.options = names;
        }
        Ok(Out::Obj(Obj::Payload {
            typename: "UpdateProjectV2FieldPayload",
            client_mutation_id,
            item: None,
        }))
    }

    /// A connection over `all`, paged by `first`/`after` or `last`/`before` as GitHub does.
    fn connection(
        &self,
        typename: &'static str,
        field: &str,
        all: Vec<Obj>,
        args: &Args,
    ) -> Result<Out, Fail> {
        let first = args.get("first").and_then(|v| v.as_i64());
        let last = args.get("last").and_then(|v| v.as_i64());
        if first.is_none() && last.is_none() {
            return Err(Fail::Pagination {
                kind: "MISSING_PAGINATION_BOUNDARIES",
                message: format!(
                    "You must provide a `first` or `last` value to properly paginate the `{field}` connection."
                ),
            });
        }
        for (name, v) in [("first", first), ("last", last)] {
            if let Some(v) = v {
                if !(0..=100).contains(&v) {
                    return Err(Fail::Pagination {
                        kind: "EXCESSIVE_PAGINATION",
                        message: format!(
                            "Requesting {v} records on the `{field}` connection exceeds the `{name}` limit of 100 records."
                        ),
                    });
                }
            }
        }
        let cursor_index = |key: &str| {
            args.get(key)
                .and_then(|v| v.as_str())
                .and_then(|c| c.strip_prefix("cursor:"))
                .and_then(|c| c.parse::<usize>().ok())
        };
        let total = all.len();
        let mut start = cursor_index("after").map_or(0, |i| i + 1).min(total);
        let mut end = cursor_index("before")
            .unwrap_or(total)
            .min(total)
            .max(start);
        if let Some(f) = first {
            end = end.min(start + f as usize);
        }
        if let Some(l) = last {
            start = start.max(end.saturating_sub(l as usize));
        }
        Ok(Out::Obj(Obj::Connection {
            typename,
            nodes: all[start..end].to_vec(),
            cursors: (start..end).map(|i| format!("cursor:{i}")).collect(),
            total,
            has_next: end < total,
            has_previous: start > 0,
        }))
    }
}

fn edge_name(connection: &str) -> &'static str {
    match connection {
        "ProjectV2ItemConnection" => "ProjectV2ItemEdge",
        "ProjectV2Connection" => "ProjectV2Edge",
        "LabelConnection" => "LabelEdge",
        "IssueConnection" => "IssueEdge",
        "IssueCommentConnection" => "IssueCommentEdge",
        "PullRequestReviewConnection" => "PullRequestReviewEdge",
        "PullRequestReviewThreadConnection" => "PullRequestReviewThreadEdge",
        "PullRequestReviewCommentConnection" => "PullRequestReviewCommentEdge",
        "ProjectV2FieldConfigurationConnection" => "ProjectV2FieldConfigurationEdge",
        "ProjectV2ItemFieldValueConnection" => "ProjectV2ItemFieldValueEdge",
        "IssueTimelineItemsConnection" => "IssueTimelineItemsEdge",
        _ => "Edge",
    }
}

fn no_node(id: &str) -> Fail {
    Fail::NotFound(format!(
        "Could not resolve to a node with the global id of '{id}'"
    ))
}

fn loc(pos: Pos) -> Value {
    json!({"line": pos.line, "column": pos.column})
}

fn arg_str(args: &Args, name: &str) -> Result<String, Fail> {
    args.get(name)
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| Fail::Invalid(format!("Argument '{name}' is missing or not a String")))
}

fn arg_u64(args: &Args, name: &str) -> Result<u64, Fail> {
    args.get(name)
        .and_then(|v| v.as_u64())
        .ok_or_else(|| Fail::Invalid(format!("Argument '{name}' is missing or not an Int")))
}

/// Put `value` under `key`, merging objects selected more than once (fragments overlapping).
fn merge_into(out: &mut Map<String, Value>, key: &str, value: Value) {
    match (out.get_mut(key), value) {
        (Some(Value::Object(existing)), Value::Object(new)) => {
            for (k, v) in new {
                merge_into(existing, &k, v);
            }
        }
        (Some(Value::Array(existing)), Value::Array(new)) if existing.len() == new.len() => {
            for (e, n) in existing.iter_mut().zip(new) {
                if let (Value::Object(e), Value::Object(n)) = (e, n) {
                    for (k, v) in n {
                        merge_into(e, &k, v);
                    }
                }
            }
        }
        (Some(_), _) => {}
        (None, value) => {
            out.insert(key.to_string(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::sandbox::state::{BoardSeed, IssueSeed, OwnerType};

    fn state() -> SandboxState {
        let mut s = SandboxState::new("acme", "widgets");
        for n in 1..=3 {
            let mut issue = IssueSeed::new(n, &format!("issue {n}"), "", "alice");
            issue.labels = vec!["bug".into()];
            s.issues.push(issue);
        }
        s.board = Some(BoardSeed {
            owner: "acme".into(),
            owner_type: OwnerType::Organization,
            number: 2,
            title: "Board".into(),
            status_field: "Status".into(),
            options: vec!["Todo".into(), "Doing".into(), "Done".into()],
            items: BTreeMap::from([
                (1, Some("Todo".into())),
                (2, None),
                (3, Some("Done".into())),
            ]),
        });
        s
    }

    fn run_as(state: &mut SandboxState, caller: &Caller, query: &str, vars: Value) -> Value {
        let doc = graphql_parser::parse_query::<&str>(query).expect("query parses");
        let (op, _) = pick_operation(&doc, None).expect("one operation");
        Exec::new(state, "http://sandbox", caller, &doc, Some(&vars)).run(op)
    }

    fn run(state: &mut SandboxState, query: &str, vars: Value) -> Value {
        let caller = Caller::Unrestricted {
            login: "alice".into(),
        };
        run_as(state, &caller, query, vars)
    }

    #[test]
    fn aliases_variables_fragments_and_typename() {
        let mut s = state();
        let out = run(
            &mut s,
            r#"
            query Q($n: Int!, $field: String = "Status") {
              repo: repository(owner: "acme", name: "widgets") {
                first: issue(number: $n) { ...Basics }
                other: issue(number: 3) { number }
              }
              owner: repositoryOwner(login: "acme") {
                __typename
                ... on ProjectV2Owner { id }
                ... on Organization { projectV2(number: 2) { title field(name: $field) { ... on ProjectV2FieldCommon { name } ... on ProjectV2SingleSelectField { options { name } } } } }
              }
            }
            fragment Basics on Issue { __typename number title labels(first: 5) { nodes { name } } }
            "#,
            json!({"n": 1}),
        );
        assert!(out.get("errors").is_none(), "{out}");
        let d = &out["data"];
        assert_eq!(d["repo"]["first"]["__typename"], "Issue");
        assert_eq!(d["repo"]["first"]["labels"]["nodes"][0]["name"], "bug");
        assert_eq!(d["repo"]["other"]["number"], 3);
        assert_eq!(d["owner"]["__typename"], "Organization");
        assert_eq!(d["owner"]["id"], "O_acme");
        let field = &d["owner"]["projectV2"]["field"];
        assert_eq!(field["name"], "Status");
        assert_eq!(field["options"][1]["name"], "Doing");
    }

    #[test]
    fn skip_and_include() {
        let mut s = state();
        let out = run(
            &mut s,
            "query($yes: Boolean!) { viewer { login @include(if: $yes) id @skip(if: $yes) } }",
            json!({"yes": true}),
        );
        assert_eq!(out["data"]["viewer"], json!({"login": "alice"}));
    }

    #[test]
    fn connections_page_and_refuse_bad_bounds() {
        let mut s = state();
        let q = r#"query($after: String) { organization(login: "acme") { projectV2(number: 2) {
            items(first: 2, after: $after) { totalCount pageInfo { hasNextPage endCursor } nodes { id } } } } }"#;
        let out = run(&mut s, q, json!({}));
        let items = &out["data"]["organization"]["projectV2"]["items"];
        assert_eq!(items["totalCount"], 3);
        assert_eq!(items["nodes"].as_array().unwrap().len(), 2);
        assert_eq!(items["pageInfo"]["hasNextPage"], true);
        let cursor = items["pageInfo"]["endCursor"].clone();
        let out = run(&mut s, q, json!({"after": cursor}));
        let items = &out["data"]["organization"]["projectV2"]["items"];
        assert_eq!(items["nodes"], json!([{"id": "PVTI_3"}]));
        assert_eq!(items["pageInfo"]["hasNextPage"], false);

        let out = run(
            &mut s,
            r#"{ organization(login: "acme") { projectV2(number: 2) { items { totalCount } } } }"#,
            json!({}),
        );
        assert!(out.get("data").is_none());
        assert_eq!(out["errors"][0]["type"], "MISSING_PAGINATION_BOUNDARIES");
        let out = run(
            &mut s,
            r#"{ organization(login: "acme") { projectV2(number: 2) { items(first: 101) { totalCount } } } }"#,
            json!({}),
        );
        assert_eq!(out["errors"][0]["type"], "EXCESSIVE_PAGINATION");
    }

    #[test]
    fn github_style_errors() {
        let mut s = state();
        let out = run(&mut s, "{ viewer { logn } }", json!({}));
        assert!(out.get("data").is_none());
        assert_eq!(out["errors"][0]["extensions"]["code"], "undefinedField");
        assert_eq!(
            out["errors"][0]["message"],
            "Field 'logn' doesn't exist on type 'User'"
        );
        let out = run(&mut s, "{ viewer }", json!({}));
        assert_eq!(out["errors"][0]["extensions"]["code"], "selectionMismatch");
        let out = run(&mut s, "{ viewer { login { x } } }", json!({}));
        assert_eq!(out["errors"][0]["extensions"]["code"], "selectionMismatch");
        let out = run(&mut s, "{ viewer { ...Nope } }", json!({}));
        assert_eq!(
            out["errors"][0]["extensions"]["code"],
            "useAndDefineFragment"
        );
        let out = run(&mut s, "{ viewer { ... on Nope { id } } }", json!({}));
        assert_eq!(out["errors"][0]["extensions"]["code"], "undefinedType");
        let out = run(
            &mut s,
            "query($n: Int!) { repository(owner: \"acme\", name: \"widgets\") { issue(number: $n) { id } } }",
            json!({}),
        );
        assert_eq!(out["errors"][0]["extensions"]["code"], "variableMismatch");
        let out = run(
            &mut s,
            r#"{ repository(owner: "acme", name: "nope") { id } user(login: "acme") { id } }"#,
            json!({}),
        );
        assert_eq!(out["data"], json!({"repository": null, "user": null}));
        assert_eq!(out["errors"][0]["type"], "NOT_FOUND");
        assert_eq!(out["errors"][0]["path"], json!(["repository"]));
        assert_eq!(
            out["errors"][1]["message"],
            "Could not resolve to a User with the login of 'acme'."
        );
    }

    #[test]
    fn scopes_are_checked() {
        let mut s = state();
        let caller = Caller::Token {
            login: "alice".into(),
            scopes: vec!["repo".into(), "read:project".into()],
            permissions: None,
        };
        let read = r#"{ repository(owner: "acme", name: "widgets") { issue(number: 1) { projectItems(first: 1) { nodes { id } } } } }"#;
        let out = run_as(&mut s, &caller, read, json!({}));
        assert_eq!(
            out["data"]["repository"]["issue"]["projectItems"]["nodes"][0]["id"],
            "PVTI_1"
        );
        let write = r#"mutation { updateProjectV2ItemFieldValue(input: {projectId: "PVT_2", itemId: "PVTI_1", fieldId: "PVTSSF_2", value: {singleSelectOptionId: "x"}}) { clientMutationId } }"#;
        let out = run_as(&mut s, &caller, write, json!({}));
        assert_eq!(out["errors"][0]["type"], "INSUFFICIENT_SCOPES");
        assert!(
            out["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("['project']")
        );
        let repo_only = Caller::Token {
            login: "alice".into(),
            scopes: vec!["repo".into()],
            permissions: None,
        };
        let out = run_as(&mut s, &repo_only, read, json!({}));
        assert!(out.get("data").is_none());
        assert!(
            out["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("granted the: ['repo']")
        );
    }

    #[test]
    fn mutations_change_the_board() {
        let mut s = state();
        let doing = ids::option("Doing");
        let out = run(
            &mut s,
            r#"mutation($o: String!) {
                a: updateProjectV2ItemFieldValue(input: {projectId: "PVT_2", itemId: "PVTI_2", fieldId: "PVTSSF_2", value: {singleSelectOptionId: $o}, clientMutationId: "c1"}) {
                  clientMutationId projectV2Item { fieldValueByName(name: "Status") { ... on ProjectV2ItemFieldSingleSelectValue { name optionId } } }
                }
              }"#,
            json!({"o": doing}),
        );
        assert!(out.get("errors").is_none(), "{out}");
        assert_eq!(out["data"]["a"]["clientMutationId"], "c1");
        assert_eq!(
            out["data"]["a"]["projectV2Item"]["fieldValueByName"]["name"],
            "Doing"
        );
        assert_eq!(s.column_of(2), Some("Doing"));
        s.board.as_mut().unwrap().items.remove(&3);
        let out = run(
            &mut s,
            r#"mutation { addProjectV2ItemById(input: {projectId: "PVT_2", contentId: "I_3"}) { item { id content { ... on Issue { number } } } } }"#,
            json!({}),
        );
        assert_eq!(
            out["data"]["addProjectV2ItemById"]["item"]["content"]["number"],
            3
        );
        assert!(s.on_board(3) && s.column_of(3).is_none());
        let out = run(
            &mut s,
            r#"mutation { addProjectV2ItemById(input: {projectId: "PVT_9", contentId: "I_3"}) { item { id } } }"#,
            json!({}),
        );
        assert_eq!(out["errors"][0]["type"], "NOT_FOUND");
    }

    #[test]
    fn nodes_by_id() {
        let mut s = state();
        let out = run(
            &mut s,
            r#"{ a: node(id: "I_2") { __typename ... on Issue { title } } b: node(id: "PVTI_1") { ... on ProjectV2Item { type } } c: node(id: "zzz") { id } }"#,
            json!({}),
        );
        assert_eq!(
            out["data"]["a"],
            json!({"__typename": "Issue", "title": "issue 2"})
        );
        assert_eq!(out["data"]["b"]["type"], "ISSUE");
        assert_eq!(out["data"]["c"], Value::Null);
    }

    #[test]
    fn operation_choice() {
        let doc = graphql_parser::parse_query::<&str>(
            "query A { viewer { login } } query B { viewer { id } }",
        )
        .unwrap();
        assert!(pick_operation(&doc, None).is_err());
        assert_eq!(pick_operation(&doc, Some("B")).unwrap().1, "B");
        assert!(pick_operation(&doc, Some("C")).is_err());
        let doc = graphql_parser::parse_query::<&str>("{ viewer { login } }").unwrap();
        assert_eq!(pick_operation(&doc, None).unwrap().1, "anonymous");
    }
}
