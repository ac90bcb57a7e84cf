#!/usr/bin/env bash
# Install raftsched with its test tools into .venv and run the whole test suite.
#   scripts/test.sh [pytest args]     e.g. scripts/test.sh -m unit
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$repo/scripts/bootstrap.sh")"
cd "$repo"
"$py" scripts/gen_protos.py --check
exec "$py" -m pytest -q "$@"
