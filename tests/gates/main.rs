//! Gate tests. The tool gates run the real pinned tools (tsc, typescript-language-server, knip, jscpd,
//! pylsp) on fixture repositories with a real git history; `scripts/test.sh` installs them. A missing
//! tool fails a test when `CI` is set and skips it otherwise.

mod common;

mod changes;
mod ci;
mod cli;
mod command;
mod confined;
mod failures;
mod lsp_load;
mod naming;
mod package_safety;
mod session;
mod tools;
mod traceability;
mod trust;
