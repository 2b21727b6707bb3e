#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs the pinned gate tools when missing, then runs
# every test (unit, scenario and real-tool gate tests). Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-tools.sh
# Debian packages some tests need, installed when their command is missing (quietly, best effort:
# a test that still lacks one says why it fails).
apt_install() { # COMMAND PACKAGE WHO-NEEDS-IT
  command -v "$1" >/dev/null && return 0
  command -v apt-get >/dev/null || return 0
  local as_root=()
  [[ $(id -u) == 0 ]] || as_root=(sudo -n)
  "${as_root[@]}" apt-get install -y --no-install-recommends "$2" >/dev/null 2>&1 ||
    { "${as_root[@]}" apt-get update >/dev/null 2>&1 &&
      "${as_root[@]}" apt-get install -y --no-install-recommends "$2" >/dev/null 2>&1; } ||
    echo "test.sh: could not install $2; $3 will say why they fail" >&2
}
# The agentSandbox tests run agents in bubblewrap.
apt_install bwrap bubblewrap "the agentSandbox tests"
# The web view's tests open the sandbox's pages in headless Chromium (tests/web_view.rs).
apt_install chromium chromium "the web view's browser tests"
# shellcheck source=scripts/tools-env.sh
source scripts/tools-env.sh
cargo test --locked "$@"
