#!/usr/bin/env bash
# Create .venv (if needed) and install raftsched into it, at the versions pinned in constraints.txt.
#   scripts/bootstrap.sh [runtime]   raftsched and what it runs on: what a cluster needs (launch_cluster.sh)
#   scripts/bootstrap.sh dev         the same and the dev tools: pytest, ruff, mypy, ... (test.sh)
# Prints the venv's python on stdout and its progress on stderr. The install is editable (the checkout's
# code runs) and leaves nothing in the checkout: the build backend (scripts/build_backend.py) keeps
# setuptools' build/ and raftsched.egg-info/ in a temporary folder.
set -euo pipefail
repo="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${RAFTSCHED_VENV:-$repo/.venv}"
mode="${1:-runtime}"
say() { echo "raftsched setup: $*" >&2; }
case "$mode" in
  runtime) target="$repo" what="raftsched and its runtime dependencies" ;;
  dev) target="$repo[dev]" what="raftsched, its runtime dependencies and the dev tools (tests, linters)" ;;
  *) say "unknown mode '$mode': use 'runtime' (what a cluster needs) or 'dev' (with the test tools)"; exit 2 ;;
esac
# a dev install holds the runtime too: its stamp stands for both
dev_stamp="$venv/.raftsched-installed"
runtime_stamp="$venv/.raftsched-installed-runtime"
fresh() { [ -f "$1" ] && [ ! "$repo/pyproject.toml" -nt "$1" ] && [ ! "$repo/constraints.txt" -nt "$1" ]; }
# the venv runs this checkout's code, from any folder (a venv copied or moved with another checkout does not)
ours() {
  [ -x "$venv/bin/python" ] || return 1
  [ "$(cd / && "$venv/bin/python" -c 'import os, raftsched; print(os.path.realpath(raftsched.__file__))' 2>/dev/null)" \
    = "$(realpath "$repo/raftsched/__init__.py")" ]
}
if { fresh "$dev_stamp" || { [ "$mode" = runtime ] && fresh "$runtime_stamp"; }; } && ours; then
  echo "$venv/bin/python"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  say "creating a virtual environment in $venv"
  python3 -m venv "$venv" >&2
fi
# what installs made in the checkout before the build backend kept them outside it (setuptools' own folders only)
if [ -d "$repo/raftsched.egg-info" ]; then
  say "removing raftsched.egg-info/, left in the checkout by an earlier install"
  rm -rf "$repo/raftsched.egg-info"
fi
if [ -d "$repo/build" ]; then
  rm -rf "$repo/build/lib" "$repo/build"/bdist.*
  rmdir "$repo/build" 2>/dev/null && say "removed build/, left in the checkout by an earlier install" || true
fi
say "upgrading pip"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
say "installing $what (pinned in constraints.txt)"
"$venv/bin/python" -m pip install -q -c "$repo/constraints.txt" -e "$target" 2>&1 \
  | grep -v -e "BuildBackendWarning: Editable installation" -e "^ *!!$" -e "^ *\*\{20,\}$" \
      -e "Please be careful with folders" -e "name as your package as they may take" -e "with strategy, WheelFile" \
      -e "^ *$" >&2 || true
(cd / && "$venv/bin/python" -c "import raftsched.cluster, grpc, pysyncobj") && ours \
  || { say "the install failed (see above): $venv does not run the code in $repo"; exit 1; }
if [ "$mode" = dev ]; then
  touch "$dev_stamp"
else
  touch "$runtime_stamp"
fi
say "installed into $venv"
echo "$venv/bin/python"
