#!/usr/bin/env bash
# Create .venv (if needed) and install raftsched with its dev extras into it, at the versions
# pinned in constraints.txt. Used by launch_cluster.sh and test.sh; prints the venv's python on
# stdout and its progress on stderr.
set -euo pipefail
repo="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${RAFTSCHED_VENV:-$repo/.venv}"
say() { echo "raftsched setup: $*" >&2; }
if [ ! -x "$venv/bin/python" ]; then
  say "creating a virtual environment in $venv"
  python3 -m venv "$venv" >&2
fi
stamp="$venv/.raftsched-installed"
if [ ! -f "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ] || [ "$repo/constraints.txt" -nt "$stamp" ]; then
  say "upgrading pip"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  say "installing raftsched and its dependencies (pinned in constraints.txt; about a minute the first time)"
  "$venv/bin/python" -m pip install -q -c "$repo/constraints.txt" -e "$repo[dev]" 2>&1 \
    | grep -v -e "BuildBackendWarning: Editable installation" -e "^ *!!$" -e "^ *\*\{20,\}$" \
        -e "Please be careful with folders" -e "name as your package as they may take" -e "with strategy, WheelFile" \
        -e "^ *$" >&2 || true
  "$venv/bin/python" -c "import raftsched.cluster, grpc, pysyncobj" || { say "the install failed (see above)"; exit 1; }
  touch "$stamp"
  say "installed into $venv"
fi
echo "$venv/bin/python"
