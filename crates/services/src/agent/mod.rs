//! Role agents: their definitions, the output protocol, and the backends that run them.
//!
//! A dispatch is an [`AgentRequest`] (built by [`AgentRequest::for_role`], the same for the pipeline
//! and `supervisor agent`), run by [`run_agent`] into an [`AgentRun`]: one normalised result whatever
//! the CLI (pi, Claude Code, Codex, a command, or a script).

pub mod backend;
mod definition;
mod dispatch;
mod error;
mod preflight;
mod prices;
mod protocol;
mod run;
mod runner;
mod sandbox;
pub mod stream;
mod transcript;

pub use crate::process::process_group_alive;
pub use backend::{AgentCli, Backend, Invocation, Launch};
pub use definition::{
    AGENT_DIRS, AgentDefinition, DEFAULT_AGENTS, EPIC_ROLES, RoleSet, THINKING_LEVELS,
    is_safe_agent_name,
};
pub use dispatch::{
    AgentRequest, BASE_ENV, DEFAULT_AGENT_ENV, DEGRADING_ROLE, GITHUB_TOKEN_VARS, agent_env,
    agent_env_from, agent_env_names, system_prompt,
};
pub use error::AgentError;
pub use preflight::{BackendCheck, Preflight, find_program, preflight};
pub use prices::Prices;
pub use protocol::{
    Action, AuditFinding, ClaimedScore, Evidence, Outcome, ProtocolError, Severity,
    balanced_objects, fenced_json_blocks, parse_outcome, repair_json, strip_ansi,
};
pub use run::{
    AgentRun, DEFAULT_KILL_GRACE, DEFAULT_TRANSCRIPT_CAP, ExitReason, Limits, Usage, human_duration,
};
pub use runner::{failure_line, run_agent};
pub use sandbox::{Confinement, Sandbox, installation};
pub use stream::Pulse;
pub use transcript::human_bytes;
