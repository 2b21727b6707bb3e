//! Errors of preparing an agent dispatch. A dispatch that starts always yields an `AgentRun`; these
//! are the mistakes found before anything runs.

/// Something that keeps an agent from being dispatched.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("agent backend `{name}` {problem}; {fix}")]
    Backend {
        name: String,
        problem: String,
        fix: String,
    },
    #[error("no role agent `{name}`; known roles: {known}")]
    UnknownRole { name: String, known: String },
    #[error("the agent's working directory {path} does not exist; create it or pass another --in")]
    NoWorkingDirectory { path: std::path::PathBuf },
}
