#!/usr/bin/env bash
# Install raftsched into .venv (first run only) and start a local cluster with a sample job; it keeps
# running in the background. Run again, it resumes the cluster in local-cluster/ (or says it runs).
#   scripts/launch_cluster.sh [--nodes N] [--dir DIR] [--no-sample] [--free-ports] [--secure|--mtls]
#   scripts/launch_cluster.sh --stop [--dir DIR]
#   scripts/launch_cluster.sh --start-node ID | --pid ID|leader [--dir DIR]
set -euo pipefail
repo="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$repo/scripts/bootstrap.sh")"
exec "$py" "$repo/scripts/launch_cluster.py" "$@"
