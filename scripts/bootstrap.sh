#!/usr/bin/env bash
# Create .venv (if needed) and install raftsched with its dev extras into it.
# Sourced by launch_cluster.sh and test.sh; prints the venv's python on stdout.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${RAFTSCHED_VENV:-$repo/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
stamp="$venv/.raftsched-installed"
if [ ! -f "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  "$venv/bin/python" -m pip install -q -e "$repo[dev]" >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
