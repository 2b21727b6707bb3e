#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs the pinned gate tools when missing, then runs
# every test (unit, scenario and real-tool gate tests). Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-tools.sh
# The agentSandbox tests run agents in bubblewrap (Debian's bubblewrap package).
if ! command -v bwrap >/dev/null && command -v apt-get >/dev/null; then
  as_root=()
  [[ $(id -u) == 0 ]] || as_root=(sudo -n)
  "${as_root[@]}" apt-get install -y --no-install-recommends bubblewrap >/dev/null 2>&1 ||
    { "${as_root[@]}" apt-get update >/dev/null 2>&1 &&
      "${as_root[@]}" apt-get install -y --no-install-recommends bubblewrap >/dev/null 2>&1; } ||
    echo "test.sh: could not install bubblewrap; the agentSandbox tests will say why they fail" >&2
fi
# shellcheck source=scripts/tools-env.sh
source scripts/tools-env.sh
cargo test --locked "$@"
