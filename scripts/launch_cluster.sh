#!/usr/bin/env bash
# Install raftsched into .venv (first run only) and start a local cluster with a sample job.
#   scripts/launch_cluster.sh [--nodes N] [--dir DIR] [--no-sample]
#   scripts/launch_cluster.sh --stop [--dir DIR]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$repo/scripts/bootstrap.sh")"
exec "$py" "$repo/scripts/launch_cluster.py" "$@"
