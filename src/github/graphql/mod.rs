//! GraphQL operations, compiled against GitHub's official schema (`schema.graphql`, see `README.md`
//! beside it). A field or argument GitHub does not have fails the build.

#![allow(clippy::upper_case_acronyms)]

use graphql_client::GraphQLQuery;

/// GitHub's `URI` scalar.
pub type URI = String;

/// Operations of one `.graphql` file, typed by graphql_client from the vendored schema.
macro_rules! operation {
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

operation!("src/github/graphql/board.graphql": IssueBoardItems, ProjectBoard, AddToBoard, UpdateItemStatus);

/// Who edited an issue and its comments (`trust.graphql`).
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "src/github/graphql/schema.graphql",
    query_path = "src/github/graphql/trust.graphql",
    response_derives = "Debug, Clone"
)]
pub struct IssueEditors;

// Setting a repository up: owners, users, creating and linking a board, rewriting its options.
operation!(
    "src/github/graphql/setup.graphql": OwnerKind,
    UserExists,
    RepositorySetup,
    CreateBoard,
    LinkBoard,
    SetStatusOptions
);
