#!/usr/bin/env bash
# Install the Debian packages raftsched's tests use (only those missing). Needs root (CI runs as root).
set -euo pipefail
# prometheus: the real Prometheus server that tests/integration/test_observability.py scrapes the nodes with
# chromium, chromium-driver: the headless browser (and its WebDriver) tests/integration/test_web_view.py drives
# curl: the health probes of docs/deploy.md, as tests/fault/test_three_hosts.py runs them
packages=(curl fuse3 iproute2 prometheus chromium chromium-driver)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "raftsched setup: installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
