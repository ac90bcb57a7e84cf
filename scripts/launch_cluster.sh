#!/usr/bin/env bash
# Install raftsched into .venv (first run only: what a cluster needs, not the dev tools) and start a
# local cluster with a sample job; it keeps running in the background. Run again, it resumes the
# cluster in local-cluster/ (or says it runs). scripts/test.sh adds the dev tools to the same .venv.
#   scripts/launch_cluster.sh [--nodes N] [--dir DIR] [--no-sample] [--free-ports] [--secure|--mtls]
#   scripts/launch_cluster.sh --stop [--dir DIR]
#   scripts/launch_cluster.sh --start-node ID | --pid ID|leader [--dir DIR]
#   scripts/launch_cluster.sh --add-node [ID] [--dir DIR]
set -euo pipefail
repo="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$repo/scripts/bootstrap.sh" runtime)"
exec "$py" "$repo/scripts/devcluster/launch_cluster.py" "$@"
