//! Quality gates between Implementation and Audit.

mod report;

pub use report::{Finding, FindingSeverity, GateReport, GateStatus, Verdict, verdict};
