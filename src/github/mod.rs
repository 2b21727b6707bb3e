pub mod graphql;
