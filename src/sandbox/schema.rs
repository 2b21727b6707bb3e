//! What GitHub's schema (the vendored `schema.graphql`) says about types: their fields, and which
//! object types a union or interface stands for. Lets the sandbox answer like GitHub for a field
//! that does not exist, tell it from one it does not emulate, and match fragments on abstract types.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use graphql_parser::schema::{Definition, TypeDefinition};

const SCHEMA: &str = include_str!("../github/graphql/schema.graphql");

#[derive(Default)]
pub(crate) struct SchemaIndex {
    fields: HashMap<&'static str, HashSet<&'static str>>,
    /// Union or interface → object types.
    possible: HashMap<&'static str, HashSet<&'static str>>,
}

impl SchemaIndex {
    pub fn get() -> &'static SchemaIndex {
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
                        index
                            .fields
                            .insert(o.name, o.fields.iter().map(|f| f.name).collect());
                        for i in o.implements_interfaces {
                            index.possible.entry(i).or_default().insert(o.name);
                        }
                    }
                    TypeDefinition::Interface(i) => {
                        index
                            .fields
                            .insert(i.name, i.fields.iter().map(|f| f.name).collect());
                    }
                    TypeDefinition::Union(u) => {
                        index
                            .possible
                            .entry(u.name)
                            .or_default()
                            .extend(u.types.iter().copied());
                    }
                    _ => {}
                }
            }
            index
        })
    }

    /// Whether GitHub's `type_name` has `field`.
    pub fn has_field(&self, type_name: &str, field: &str) -> bool {
        self.fields
            .get(type_name)
            .is_some_and(|f| f.contains(field))
    }

    /// Whether GitHub has a type of this name.
    pub fn has_type(&self, type_name: &str) -> bool {
        self.fields.contains_key(type_name) || self.possible.contains_key(type_name)
    }

    /// Whether an object of type `object` matches a fragment on `condition`.
    pub fn matches(&self, object: &str, condition: &str) -> bool {
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
