#!/usr/bin/env bash
# Installs the pinned quality-gate tools into .tools/ when they are missing or at another version,
# and the pinned agent CLIs (pi, Claude Code, Codex) into .tools/agents/ for the contract tests.
# Needs node/npm (Node ≥ 20.19) and python3 with venv. Prints what it did; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd -P)"

NPM_TOOLS=(
  "typescript@5.9.3"
  "typescript-language-server@5.1.2"
  "knip@6.44.2"
  "jscpd@4.3.0"
)
# pylsp reports errors only through its pyflakes plugin: without it every Python file looks clean.
PY_TOOLS=(
  "python-lsp-server[pyflakes]==1.15.0"
)

# The agent CLIs the contract tests (tests/agent_contract.rs) run against local fake model servers.
AGENT_TOOLS=(
  "@mariozechner/pi-coding-agent@0.73.1"
  "@anthropic-ai/claude-code@2.1.330"
  "@openai/codex@0.169.0"
)

install_agent_clis() {
  local stamp=".tools/agents/installed" want
  want="$(printf '%s\n' "${AGENT_TOOLS[@]}")"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
    && [[ -x .tools/agents/node_modules/.bin/pi && -x .tools/agents/node_modules/.bin/claude \
      && -x .tools/agents/node_modules/.bin/codex ]]; then
    return 0
  fi
  mkdir -p .tools/agents
  echo "installing agent CLIs into .tools/agents/: ${AGENT_TOOLS[*]}" >&2
  (cd .tools/agents && { [[ -f package.json ]] || echo '{"private": true}' > package.json; } \
    && npm install --no-audit --no-fund --loglevel=error --save-exact "${AGENT_TOOLS[@]}" >&2)
  printf '%s\n' "$want" > "$stamp"
}
install_agent_clis

stamp=".tools/installed"
want="$(printf '%s\n' "${NPM_TOOLS[@]}" "${PY_TOOLS[@]}")"

# A virtualenv copied or moved from elsewhere still runs the other copy's interpreter (its scripts'
# shebangs name the old path): start it afresh.
venv_ok() {
  [[ -x .tools/venv/bin/python && -x .tools/venv/bin/pip ]] &&
    [[ "$(head -n1 .tools/venv/bin/pip)" == "#!$root/.tools/venv/bin/python"* ]]
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && venv_ok \
  && [[ -x .tools/node/node_modules/.bin/tsc ]]; then
  exit 0
fi

mkdir -p .tools/node
echo "installing gate tools into .tools/: ${NPM_TOOLS[*]} ${PY_TOOLS[*]}" >&2
(cd .tools/node && { [[ -f package.json ]] || echo '{"private": true}' > package.json; } \
  && npm install --no-audit --no-fund --loglevel=error --save-exact "${NPM_TOOLS[@]}" >&2)
if ! venv_ok; then
  rm -rf .tools/venv
  python3 -m venv .tools/venv
fi
.tools/venv/bin/pip install --quiet --disable-pip-version-check "${PY_TOOLS[@]}" >&2
printf '%s\n' "$want" > "$stamp"
