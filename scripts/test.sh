#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs the pinned gate tools when missing, then runs
# every test (unit, scenario and real-tool gate tests). Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-tools.sh
# shellcheck source=scripts/tools-env.sh
source scripts/tools-env.sh
cargo test --locked "$@"
