//! Role agents: their definitions, the output protocol, and the backends that run them.

mod definition;
mod protocol;

pub use definition::{
    AGENT_DIRS, AgentDefinition, DEFAULT_AGENTS, RoleSet, THINKING_LEVELS, is_safe_agent_name,
};
pub use protocol::{
    Action, AuditFinding, ClaimedScore, Evidence, Outcome, ProtocolError, Severity,
    balanced_objects, fenced_json_blocks, parse_outcome, repair_json, strip_ansi,
};
