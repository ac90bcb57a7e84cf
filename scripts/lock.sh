#!/usr/bin/env bash
# Regenerate constraints.txt: every distribution a fresh `pip install -e .[dev]` brings, pinned.
# Run after changing dependencies in pyproject.toml; commit the result. scripts/bootstrap.sh installs
# with `-c constraints.txt`, so every machine (and CI) gets the same versions.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
"$tmp/venv/bin/python" -m pip install -q -e "$repo[dev]"
{
  echo "# Pinned versions of everything raftsched installs (runtime and dev); made by scripts/lock.sh."
  echo "# scripts/bootstrap.sh installs with -c constraints.txt; regenerate after changing pyproject.toml."
  "$tmp/venv/bin/python" -m pip freeze --exclude-editable | LC_ALL=C sort -f
} > "$repo/constraints.txt"
echo "wrote $repo/constraints.txt"
