//! GraphQL operations, compiled against GitHub's official schema (`schema.graphql`, see `README.md`
//! beside it). A field or argument GitHub does not have fails the build.

#![allow(clippy::upper_case_acronyms)]

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use graphql_client::GraphQLQuery;
use graphql_parser::query::{Definition, OperationDefinition, Selection, SelectionSet};

/// GitHub's `URI` scalar.
pub(crate) type URI = String;
/// GitHub's `BigInt` scalar: an integer too large for `Int`, as a string of digits.
pub(crate) type BigInt = String;

/// Operations of a `.graphql` file, typed by graphql_client from the vendored schema.
macro_rules! operations {
    ($file:tt: $($name:ident),+) => {$(
        #[derive(GraphQLQuery)]
        #[graphql(
            schema_path = "src/github/graphql/schema.graphql",
            query_path = $file,
            response_derives = "Debug, Clone"
        )]
        pub struct $name;
    )+};
}

// The board: an issue with its card, its editors and its parent; the board's columns, adding a
// card, moving it.
operations!(
    "src/github/graphql/board.graphql": IssueContext, ProjectBoard, AddToBoard, UpdateItemStatus
);
// The board as a whole: one page of its cards; one card by id (the scheduler's polls and webhooks).
operations!("src/github/graphql/board.graphql": BoardItems, BoardCard);
// The login a token acts as.
operations!("src/github/graphql/trust.graphql": Viewer);
// Setting a repository up: owners, users, creating and linking a board, rewriting its options.
operations!(
    "src/github/graphql/setup.graphql": OwnerKind,
    OwnerBoards,
    UserExists,
    RepositorySetup,
    CreateBoard,
    LinkBoard,
    SetStatusOptions
);

// Review feedback on a pull request, and resolving its threads.
operations!("src/github/graphql/review.graphql": PullFeedback, ResolveThread);

/// GitHub's `DateTime` scalar (ISO 8601).
pub(crate) type DateTime = String;
/// GitHub's `GitObjectID` scalar (a commit sha).
pub(crate) type GitObjectID = String;

/// The document to send for operation `name` of `document` (a whole `.graphql` file as
/// graphql_client embeds it): the operation and the fragments it uses, nothing else. Computed once
/// per operation.
pub(crate) fn operation_document(document: &str, name: &str) -> Result<Arc<str>, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<str>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(done) = cache.lock().ok().and_then(|c| c.get(name).cloned()) {
        return Ok(done);
    }
    let trimmed: Arc<str> = trim_to_operation(document, name)?.into();
    if let Ok(mut c) = cache.lock() {
        c.insert(name.to_string(), trimmed.clone());
    }
    Ok(trimmed)
}

fn trim_to_operation(document: &str, name: &str) -> Result<String, String> {
    let doc = graphql_parser::parse_query::<&str>(document)
        .map_err(|e| format!("the operation document does not parse: {e}"))?;
    let op = doc
        .definitions
        .iter()
        .find(|d| match d {
            Definition::Operation(OperationDefinition::Query(q)) => q.name == Some(name),
            Definition::Operation(OperationDefinition::Mutation(m)) => m.name == Some(name),
            _ => false,
        })
        .ok_or_else(|| format!("no operation named {name} in the document"))?;
    let fragments = fragment_map(&doc);
    // Fragments the operation reaches, directly or through other fragments.
    let mut needed = BTreeSet::new();
    let mut pending = Vec::new();
    let root = match op {
        Definition::Operation(OperationDefinition::Query(q)) => &q.selection_set,
        Definition::Operation(OperationDefinition::Mutation(m)) => &m.selection_set,
        _ => unreachable!("found as a query or a mutation"),
    };
    spreads(root, &mut pending);
    while let Some(f) = pending.pop() {
        if needed.insert(f) {
            let def = fragments
                .get(f)
                .ok_or_else(|| format!("fragment {f} is used by {name} but not defined"))?;
            spreads(&def.selection_set, &mut pending);
        }
    }
    let mut out = op.to_string();
    for f in needed {
        out.push_str(&fragments[f].to_string());
    }
    Ok(out)
}

/// The fragments a document defines, by name.
pub fn fragment_map<'d, 'q>(
    doc: &'d graphql_parser::query::Document<'q, &'q str>,
) -> HashMap<&'q str, &'d graphql_parser::query::FragmentDefinition<'q, &'q str>> {
    doc.definitions
        .iter()
        .filter_map(|d| match d {
            Definition::Fragment(f) => Some((f.name, f)),
            Definition::Operation(_) => None,
        })
        .collect()
}

/// Names of the fragments spread anywhere in `set`.
fn spreads<'q>(set: &SelectionSet<'q, &'q str>, out: &mut Vec<&'q str>) {
    for item in &set.items {
        match item {
            Selection::Field(f) => spreads(&f.selection_set, out),
            Selection::FragmentSpread(s) => out.push(s.fragment_name),
            Selection::InlineFragment(i) => spreads(&i.selection_set, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_is_sent_alone_with_its_fragments() {
        let whole = issue_context::QUERY;
        let move_card = operation_document(whole, "UpdateItemStatus").unwrap();
        assert!(move_card.contains("mutation UpdateItemStatus"));
        for other in ["IssueContext", "ProjectBoard", "AddToBoard", "fragment"] {
            assert!(!move_card.contains(other), "{other} in {move_card}");
        }
        let items = operation_document(whole, "IssueContext").unwrap();
        assert!(items.contains("fragment StatusValue") && items.contains("fragment StatusField"));
        assert!(!items.contains("AddToBoard"));
        let add = operation_document(whole, "AddToBoard").unwrap();
        assert!(add.contains("fragment StatusValue") && add.contains("fragment StatusField"));
        assert!(!add.contains("fragment PolledItem"), "{add}");
        assert!(
            move_card.len() * 4 < whole.len(),
            "{} of {}",
            move_card.len(),
            whole.len()
        );
        // What is sent still parses and names its operation.
        for doc in [&move_card, &items, &add] {
            graphql_parser::parse_query::<&str>(doc).unwrap();
        }
        assert!(operation_document(whole, "Nope").is_err());
    }
}
