//! What GitHub's schema (the vendored `schema.graphql`) says about types: their fields, and which
//! object types a union or interface stands for. Lets the sandbox answer like GitHub for a field
//! that does not exist, tell it from one it does not emulate, and match fragments on abstract types.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use graphql_parser::schema::{Definition, Field, InputValue, Type, TypeDefinition};

const SCHEMA: &str = include_str!("../../../github/src/github/graphql/schema.graphql");

/// A field's type and arguments.
pub(crate) struct FieldDef {
    pub(crate) ty: Type<'static, &'static str>,
    pub(crate) args: Vec<InputValue<'static, &'static str>>,
}

#[derive(Default)]
pub(crate) struct SchemaIndex {
    fields: HashMap<&'static str, HashSet<&'static str>>,
    /// Union or interface → object types.
    possible: HashMap<&'static str, HashSet<&'static str>>,
    /// (type, field) → its type and arguments, for objects and interfaces.
    defs: HashMap<&'static str, HashMap<&'static str, FieldDef>>,
    enums: HashMap<&'static str, HashSet<&'static str>>,
    /// Input object → its fields.
    inputs: HashMap<&'static str, Vec<InputValue<'static, &'static str>>>,
    scalars: HashSet<&'static str>,
}

impl SchemaIndex {
    pub(crate) fn get() -> &'static SchemaIndex {
        static INDEX: OnceLock<SchemaIndex> = OnceLock::new();
        INDEX.get_or_init(|| {
            let mut index = SchemaIndex::default();
            let Ok(doc) = graphql_parser::schema::parse_schema::<&'static str>(SCHEMA) else {
                tracing::error!("the vendored GitHub schema does not parse");
                return index;
            };
            for def in doc.definitions {
                let Definition::TypeDefinition(t) = def else {
                    continue;
                };
                match t {
                    TypeDefinition::Object(o) => {
                        for i in o.implements_interfaces {
                            index.possible.entry(i).or_default().insert(o.name);
                        }
                        index.add_fields(o.name, o.fields);
                    }
                    TypeDefinition::Interface(i) => index.add_fields(i.name, i.fields),
                    TypeDefinition::Enum(e) => {
                        index
                            .enums
                            .insert(e.name, e.values.iter().map(|v| v.name).collect());
                    }
                    TypeDefinition::InputObject(i) => {
                        index.inputs.insert(i.name, i.fields);
                    }
                    TypeDefinition::Scalar(sc) => {
                        index.scalars.insert(sc.name);
                    }
                    TypeDefinition::Union(u) => {
                        index
                            .possible
                            .entry(u.name)
                            .or_default()
                            .extend(u.types.iter().copied());
                    }
                }
            }
            index
        })
    }

    /// Whether GitHub's `type_name` has `field`.
    pub(crate) fn has_field(&self, type_name: &str, field: &str) -> bool {
        self.fields
            .get(type_name)
            .is_some_and(|f| f.contains(field))
    }

    fn add_fields(&mut self, owner: &'static str, fields: Vec<Field<'static, &'static str>>) {
        self.fields
            .insert(owner, fields.iter().map(|f| f.name).collect());
        let defs = self.defs.entry(owner).or_default();
        for f in fields {
            defs.insert(
                f.name,
                FieldDef {
                    ty: f.field_type,
                    args: f.arguments,
                },
            );
        }
    }

    /// The type of `type_name.field`.
    pub(crate) fn field_type(
        &self,
        type_name: &str,
        field: &str,
    ) -> Option<&Type<'static, &'static str>> {
        self.field(type_name, field).map(|d| &d.ty)
    }

    /// The type and arguments of `type_name.field`.
    pub(crate) fn field(&self, type_name: &str, field: &str) -> Option<&FieldDef> {
        self.defs.get(type_name)?.get(field)
    }

    /// The values of enum `name`.
    pub(crate) fn enum_values(&self, name: &str) -> Option<&HashSet<&'static str>> {
        self.enums.get(name)
    }

    /// The fields of input object `name`.
    pub(crate) fn input_fields(&self, name: &str) -> Option<&[InputValue<'static, &'static str>]> {
        self.inputs.get(name).map(Vec::as_slice)
    }

    /// Whether `name` is a scalar (built in, or GitHub's own such as `DateTime`).
    pub(crate) fn is_scalar(&self, name: &str) -> bool {
        matches!(name, "Int" | "Float" | "String" | "Boolean" | "ID") || self.scalars.contains(name)
    }

    /// Whether GitHub has a type of this name.
    pub(crate) fn has_type(&self, type_name: &str) -> bool {
        self.fields.contains_key(type_name) || self.possible.contains_key(type_name)
    }

    /// Whether an object of type `object` matches a fragment on `condition`.
    pub(crate) fn matches(&self, object: &str, condition: &str) -> bool {
        object == condition
            || self
                .possible
                .get(condition)
                .is_some_and(|p| p.contains(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_github_types() {
        let s = SchemaIndex::get();
        assert!(s.has_field("Issue", "projectItems"));
        assert!(!s.has_field("Issue", "frobnicate"));
        assert!(s.matches("ProjectV2SingleSelectField", "ProjectV2FieldConfiguration"));
        assert!(s.matches("Organization", "ProjectV2Owner"));
        assert!(s.matches("User", "RepositoryOwner"));
        assert!(!s.matches("Issue", "RepositoryOwner"));
        assert!(s.has_type("ProjectV2ItemFieldValue"));
    }
}
