//! GraphQL operations, compiled against GitHub's official schema (`schema.graphql`, see `README.md`
//! beside it). A field or argument GitHub does not have fails the build.

#![allow(clippy::upper_case_acronyms)]

use graphql_client::GraphQLQuery;

/// GitHub's `URI` scalar.
pub type URI = String;

/// An operation of `board.graphql`, typed by graphql_client from the vendored schema.
macro_rules! operation {
    ($($name:ident),+) => {$(
        #[derive(GraphQLQuery)]
        #[graphql(
            schema_path = "src/github/graphql/schema.graphql",
            query_path = "src/github/graphql/board.graphql",
            response_derives = "Debug, Clone"
        )]
        pub struct $name;
    )+};
}

operation!(IssueBoardItems, ProjectBoard, AddToBoard, UpdateItemStatus);

/// Who edited an issue and its comments (`trust.graphql`).
#[derive(GraphQLQuery)]
#[graphql(
    schema_path = "src/github/graphql/schema.graphql",
    query_path = "src/github/graphql/trust.graphql",
    response_derives = "Debug, Clone"
)]
pub struct IssueEditors;

/// Setting a repository up (`setup.graphql`): owners, users, creating and linking a board,
/// rewriting its status options.
macro_rules! setup_operation {
    ($($name:ident),+) => {$(
        #[derive(GraphQLQuery)]
        #[graphql(
            schema_path = "src/github/graphql/schema.graphql",
            query_path = "src/github/graphql/setup.graphql",
            response_derives = "Debug, Clone"
        )]
        pub struct $name;
    )+};
}

setup_operation!(
    OwnerKind,
    UserExists,
    RepositorySetup,
    CreateBoard,
    LinkBoard,
    SetStatusOptions
);
