//! GitHub validates a GraphQL document against its schema before running any of it: an argument of
//! the wrong type, an argument the field does not take, a missing required argument, a variable
//! used where its type does not fit, or a variable value that does not fit its declared type fails
//! the whole document, with no `data`. The sandbox does the same, so a client that sends such a
//! document fails here as it would on github.com instead of getting partial data.

use std::collections::HashSet;

use graphql_parser::Pos;
use graphql_parser::query::{
    Definition, Document, OperationDefinition, Selection, SelectionSet, Type, TypeCondition,
    Value as GqlValue, VariableDefinition,
};
use serde_json::{Map, Value, json};

use super::schema::SchemaIndex;

type SchemaType = Type<'static, &'static str>;

/// GitHub's errors for `op` of `doc` with variable values `vars`; empty when it may run.
pub(crate) fn validate<'q>(
    doc: &Document<'q, &'q str>,
    op: &OperationDefinition<'q, &'q str>,
    vars: &Map<String, Value>,
) -> Vec<Value> {
    let (root, defs, set): (&str, &[VariableDefinition<&str>], &SelectionSet<&str>) = match op {
        OperationDefinition::Query(q) => ("Query", &q.variable_definitions, &q.selection_set),
        OperationDefinition::Mutation(m) => ("Mutation", &m.variable_definitions, &m.selection_set),
        OperationDefinition::SelectionSet(s) => ("Query", &[], s),
        OperationDefinition::Subscription(_) => return Vec::new(),
    };
    let mut v = Validator {
        schema: SchemaIndex::get(),
        doc,
        defs,
        errors: Vec::new(),
        visited: HashSet::new(),
    };
    v.variable_values(vars);
    v.selection(root, set);
    v.errors
}

struct Validator<'a, 'q> {
    schema: &'static SchemaIndex,
    doc: &'a Document<'q, &'q str>,
    defs: &'a [VariableDefinition<'q, &'q str>],
    errors: Vec<Value>,
    /// Fragments already checked (a fragment spread twice is checked once).
    visited: HashSet<&'q str>,
}

fn loc(pos: Pos) -> Value {
    json!([{"line": pos.line, "column": pos.column}])
}

/// The named type under list and non-null wrappers.
fn base<'t>(ty: &Type<'t, &'t str>) -> &'t str {
    match ty {
        Type::NamedType(n) => n,
        Type::ListType(inner) | Type::NonNullType(inner) => base(inner),
    }
}

impl<'a, 'q> Validator<'a, 'q> {
    fn selection(&mut self, ty: &str, set: &'a SelectionSet<'q, &'q str>) {
        for item in &set.items {
            match item {
                Selection::Field(f) => {
                    if f.name == "__typename" {
                        continue;
                    }
                    // A field GitHub does not have is reported when the document runs.
                    let Some(def) = self.schema.field(ty, f.name) else {
                        continue;
                    };
                    for (name, value) in &f.arguments {
                        match def.args.iter().find(|a| a.name == *name) {
                            None => self.errors.push(json!({
                                "message": format!("Field '{}' doesn't accept argument '{name}'", f.name),
                                "locations": loc(f.position),
                                "extensions": {"code": "argumentNotAccepted", "name": f.name, "typeName": "Field", "argumentName": name},
                            })),
                            Some(arg) => self.argument(f.name, name, value, &arg.value_type, f.position),
                        }
                    }
                    let missing: Vec<&str> = def
                        .args
                        .iter()
                        .filter(|a| {
                            matches!(a.value_type, Type::NonNullType(_))
                                && a.default_value.is_none()
                                && !f.arguments.iter().any(|(n, _)| *n == a.name)
                        })
                        .map(|a| a.name)
                        .collect();
                    if !missing.is_empty() {
                        self.errors.push(json!({
                            "message": format!("Field '{}' is missing required arguments: {}", f.name, missing.join(", ")),
                            "locations": loc(f.position),
                            "extensions": {"code": "missingRequiredArguments", "className": "Field", "name": f.name, "arguments": missing.join(", ")},
                        }));
                    }
                    self.selection(base(&def.ty), &f.selection_set);
                }
                Selection::FragmentSpread(s) => {
                    if !self.visited.insert(s.fragment_name) {
                        continue;
                    }
                    let doc = self.doc;
                    let frag = doc.definitions.iter().find_map(|d| match d {
                        Definition::Fragment(f) if f.name == s.fragment_name => Some(f),
                        _ => None,
                    });
                    if let Some(frag) = frag {
                        let TypeCondition::On(cond) = frag.type_condition;
                        self.selection(cond, &frag.selection_set);
                    }
                }
                Selection::InlineFragment(i) => {
                    let cond = match &i.type_condition {
                        Some(TypeCondition::On(c)) => c,
                        None => ty,
                    };
                    self.selection(cond, &i.selection_set);
                }
            }
        }
    }

    fn argument(
        &mut self,
        field: &str,
        name: &str,
        value: &GqlValue<'q, &'q str>,
        expected: &SchemaType,
        pos: Pos,
    ) {
        if let GqlValue::Variable(var) = value {
            self.variable_use(var, name, expected, pos);
            return;
        }
        if !self.literal_fits(value, expected, pos) {
            self.errors.push(json!({
                "message": format!("Argument '{name}' on Field '{field}' has an invalid value ({value}). Expected type '{expected}'."),
                "locations": loc(pos),
                "extensions": {"code": "argumentLiteralsIncompatible", "typeName": "Field", "argumentName": name},
            }));
        }
    }

    /// Variable `$var` used where `expected` goes: declared, of a type that fits.
    fn variable_use(&mut self, var: &'q str, argument: &str, expected: &SchemaType, pos: Pos) {
        let Some(def) = self.defs.iter().find(|d| d.name == var) else {
            self.errors.push(json!({
                "message": format!("Variable ${var} is used by anonymous query but not declared"),
                "locations": loc(pos),
                "extensions": {"code": "variableNotDefined", "variableName": var},
            }));
            return;
        };
        if !fits(&def.var_type, def.default_value.is_some(), expected) {
            let kind = if base(&def.var_type) == base(expected) {
                "Nullability mismatch"
            } else {
                "Type mismatch"
            };
            self.errors.push(json!({
                "message": format!("{kind} on variable ${var} and argument {argument} ({} / {expected})", def.var_type),
                "locations": loc(pos),
                "extensions": {"code": "variableMismatch", "variableName": var, "typeName": def.var_type.to_string(), "argumentName": argument, "errorMessage": kind},
            }));
        }
    }

    /// Whether literal `v` is a value of `ty` (variables inside are checked where they are used).
    fn literal_fits(&mut self, v: &GqlValue<'q, &'q str>, ty: &SchemaType, pos: Pos) -> bool {
        match (ty, v) {
            (_, GqlValue::Variable(var)) => {
                self.variable_use(var, "(input field)", ty, pos);
                true
            }
            (Type::NonNullType(_), GqlValue::Null) => false,
            (Type::NonNullType(inner), _) => self.literal_fits(v, inner, pos),
            (_, GqlValue::Null) => true,
            (Type::ListType(inner), GqlValue::List(items)) => {
                items.iter().all(|i| self.literal_fits(i, inner, pos))
            }
            (Type::ListType(inner), _) => self.literal_fits(v, inner, pos),
            (Type::NamedType(name), _) => match (*name, v) {
                ("Int", GqlValue::Int(n)) => n.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
                ("Float", GqlValue::Int(_) | GqlValue::Float(_)) => true,
                ("String", GqlValue::String(_)) => true,
                ("Boolean", GqlValue::Boolean(_)) => true,
                ("ID", GqlValue::String(_) | GqlValue::Int(_)) => true,
                ("Int" | "Float" | "String" | "Boolean" | "ID", _) => false,
                (name, _) => {
                    if let Some(values) = self.schema.enum_values(name) {
                        matches!(v, GqlValue::Enum(e) if values.contains(e))
                    } else if let Some(fields) = self.schema.input_fields(name) {
                        let GqlValue::Object(given) = v else {
                            return false;
                        };
                        given.iter().all(|(k, val)| {
                            fields
                                .iter()
                                .find(|f| f.name == *k)
                                .is_some_and(|f| self.literal_fits(val, &f.value_type, pos))
                        }) && fields.iter().all(|f| {
                            !matches!(f.value_type, Type::NonNullType(_))
                                || f.default_value.is_some()
                                || given.contains_key(f.name)
                        })
                    } else {
                        // GitHub's own scalars (DateTime, URI, BigInt, …) take strings or numbers.
                        self.schema.is_scalar(name)
                            && matches!(
                                v,
                                GqlValue::String(_) | GqlValue::Int(_) | GqlValue::Float(_)
                            )
                    }
                }
            },
        }
    }

    /// The JSON values given for the declared variables, each against its type.
    fn variable_values(&mut self, vars: &Map<String, Value>) {
        for def in self.defs {
            let Some(value) = vars.get(def.name) else {
                continue;
            };
            if let Some(problem) = self.json_fits(value, &def.var_type) {
                self.errors.push(json!({
                    "message": format!("Variable ${} of type {} was provided invalid value", def.name, def.var_type),
                    "locations": loc(def.position),
                    "extensions": {"value": value, "problems": [{"path": [], "explanation": problem}]},
                }));
            }
        }
    }

    /// Why JSON `v` is no value of `ty`, if it is not.
    fn json_fits<'t>(&self, v: &Value, ty: &Type<'t, &'t str>) -> Option<String> {
        match ty {
            Type::NonNullType(_) if v.is_null() => Some("Expected value to not be null".into()),
            Type::NonNullType(inner) => self.json_fits(v, inner),
            _ if v.is_null() => None,
            Type::ListType(inner) => match v.as_array() {
                Some(items) => items.iter().find_map(|i| self.json_fits(i, inner)),
                None => self.json_fits(v, inner),
            },
            Type::NamedType(name) => {
                let coerce = || Some(format!("Could not coerce value {v} to {name}"));
                match *name {
                    "Int" => v
                        .as_i64()
                        .filter(|n| i32::try_from(*n).is_ok())
                        .map_or_else(coerce, |_| None),
                    "Float" => (!v.is_number()).then(coerce).flatten(),
                    "String" => (!v.is_string()).then(coerce).flatten(),
                    "Boolean" => (!v.is_boolean()).then(coerce).flatten(),
                    "ID" => (!(v.is_string() || v.is_i64() || v.is_u64()))
                        .then(coerce)
                        .flatten(),
                    name => {
                        if let Some(values) = self.schema.enum_values(name) {
                            (!v.as_str().is_some_and(|s| values.contains(s))).then(|| {
                                format!("Expected {v} to be one of: {}", {
                                    let mut all: Vec<&str> = values.iter().copied().collect();
                                    all.sort_unstable();
                                    all.join(", ")
                                })
                            })
                        } else if let Some(fields) = self.schema.input_fields(name) {
                            let Some(obj) = v.as_object() else {
                                return coerce();
                            };
                            obj.iter()
                                .find_map(|(k, val)| match fields.iter().find(|f| f.name == k) {
                                    None => Some(format!("Field is not defined on {name}: {k}")),
                                    Some(f) => self.json_fits(val, &f.value_type),
                                })
                                .or_else(|| {
                                    fields
                                        .iter()
                                        .find(|f| {
                                            matches!(f.value_type, Type::NonNullType(_))
                                                && f.default_value.is_none()
                                                && !obj.contains_key(f.name)
                                        })
                                        .map(|f| {
                                            format!("Expected value to not be null at {}", f.name)
                                        })
                                })
                        } else {
                            // GitHub's own scalars: a string (or a number for BigInt and the like).
                            (v.is_object() || v.is_array()).then(coerce).flatten()
                        }
                    }
                }
            }
        }
    }
}

/// Whether a variable of `var` type (with a default or not) may stand where `loc` goes.
fn fits<'v, 'l>(var: &Type<'v, &'v str>, has_default: bool, loc: &Type<'l, &'l str>) -> bool {
    match (var, loc) {
        (Type::NonNullType(v), Type::NonNullType(l)) => fits(v, false, l),
        (_, Type::NonNullType(l)) => has_default && fits(var, false, l),
        (Type::NonNullType(v), l) => fits(v, false, l),
        (Type::ListType(v), Type::ListType(l)) => fits(v, false, l),
        (Type::NamedType(v), Type::NamedType(l)) => v == l,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(query: &str, vars: Value) -> Vec<Value> {
        let doc = graphql_parser::parse_query::<&str>(query).unwrap();
        let op = doc
            .definitions
            .iter()
            .find_map(|d| match d {
                Definition::Operation(op) => Some(op),
                Definition::Fragment(_) => None,
            })
            .unwrap();
        validate(&doc, op, vars.as_object().unwrap())
    }

    fn codes(found: &[Value]) -> Vec<String> {
        found
            .iter()
            .map(|e| {
                e["extensions"]["code"]
                    .as_str()
                    .unwrap_or(e["message"].as_str().unwrap_or_default())
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn well_typed_documents_pass() {
        let q = r#"query($o: String!, $n: Int!) { repository(owner: $o, name: "r") {
            issue(number: $n) { timelineItems(itemTypes: [RENAMED_TITLE_EVENT], last: 5) { totalCount } } } }"#;
        assert_eq!(errors(q, json!({"o": "acme", "n": 3})), Vec::<Value>::new());
        let m = r#"mutation { updateProjectV2ItemFieldValue(input: {projectId: "P", itemId: "I", fieldId: "F",
            value: {singleSelectOptionId: "x"}}) { clientMutationId } }"#;
        assert_eq!(errors(m, json!({})), Vec::<Value>::new());
    }

    #[test]
    fn wrongly_typed_arguments_fail_the_document() {
        let found = errors(
            r#"{ repository(owner: "a", name: "b") { issue(number: "5") { id } } }"#,
            json!({}),
        );
        assert_eq!(codes(&found), vec!["argumentLiteralsIncompatible"]);
        assert_eq!(
            found[0]["message"],
            "Argument 'number' on Field 'issue' has an invalid value (\"5\"). Expected type 'Int!'."
        );
        let found = errors(
            r#"query($n: String!) { repository(owner: "a", name: "b") { issue(number: $n) { id } } }"#,
            json!({"n": "5"}),
        );
        assert_eq!(codes(&found), vec!["variableMismatch"]);
        assert!(
            found[0]["message"]
                .as_str()
                .unwrap()
                .contains("(String! / Int!)")
        );
        let found = errors(
            r#"query($n: Int!) { repository(owner: "a", name: "b") { issue(number: $n) { id } } }"#,
            json!({"n": "five"}),
        );
        assert_eq!(
            found[0]["message"],
            "Variable $n of type Int! was provided invalid value"
        );
        let found = errors(
            r#"{ repository(owner: "a", name: "b") { issue(numbr: 5) { id } } }"#,
            json!({}),
        );
        assert_eq!(
            codes(&found),
            vec!["argumentNotAccepted", "missingRequiredArguments"]
        );
        let found = errors(
            r#"{ repository(owner: "a", name: "b") { issue(number: 5) { timelineItems(itemTypes: [RENAMED], last: 1) { totalCount } } } }"#,
            json!({}),
        );
        assert_eq!(codes(&found), vec!["argumentLiteralsIncompatible"]);
        let found = errors(
            r#"{ repository(owner: "a", name: "b") { issue(number: 3000000000) { id } } }"#,
            json!({}),
        );
        assert_eq!(codes(&found), vec!["argumentLiteralsIncompatible"]);
    }
}
