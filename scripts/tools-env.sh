# Source this to put the pinned gate tools and agent CLIs of .tools/ first on PATH.
_sv_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$_sv_root/.tools/node/node_modules/.bin:$_sv_root/.tools/venv/bin:$_sv_root/.tools/agents/node_modules/.bin:$PATH"
unset _sv_root
