#!/usr/bin/env bash
# Lints the GitHub Actions files (the workflows, the example workflows and action.yml) with the
# pinned actionlint (ShellCheck for the `run:` scripts) and zizmor of scripts/install-tools.sh.
# Exits non-zero on any finding, or when a linter is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$PWD/.tools/bin"
for tool in actionlint shellcheck zizmor; do
  if [[ ! -x $bin/$tool ]]; then
    echo "lint-workflows.sh: $tool is not installed in .tools/; run scripts/install-tools.sh" >&2
    exit 1
  fi
done
shopt -s nullglob
workflows=(.github/workflows/*.yml .github/examples/*.yml)
echo "actionlint: ${workflows[*]}" >&2
PATH="$bin:$PATH" actionlint -shellcheck "$bin/shellcheck" "${workflows[@]}"
# zizmor finds .github/workflows and action.yml itself; the examples are named.
echo "zizmor: . ${workflows[*]}" >&2
"$bin/zizmor" --offline --no-progress . .github/examples/*.yml
