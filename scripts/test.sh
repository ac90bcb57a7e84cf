#!/usr/bin/env bash
# Install raftsched with its test tools into .venv and run the test suite.
#   scripts/test.sh                   everything, in two passes (below)
#   scripts/test.sh [pytest args]     one pytest run, e.g. scripts/test.sh -m unit
#
# The whole suite runs in three passes: the unit, contract and integration tiers on pytest-xdist workers,
# one more than the cores (one file per worker at a time: a module's cluster is started once; the
# integration tests mostly wait for real processes, so three of them share two cores well); then the fault
# tier (its kills, freezes, full disks and elections), one file per worker on as many workers as cores, at
# most two (a fault test's own cluster and load take about one core: two side by side keep every bound they
# assert, which are seconds, and take two thirds of the time one at a time does); then, one test at a time
# on a machine nothing else loads, the tests marked `alone` (they time how quickly something answers: a CLI
# error within 2 s, GetJob under load within 1 s).
# RAFTSCHED_TEST_WORKERS sets the first pass's workers (default: cores + 1, or 1 on a one-core machine);
# RAFTSCHED_FAULT_WORKERS the second's (default: 2, or 1 on a one-core machine).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$repo/scripts/bootstrap.sh" dev)"
cd "$repo"
"$py" scripts/gen_protos.py --check
if [ "$#" -gt 0 ]; then
  exec "$py" -m pytest -q "$@"
fi
workers="${RAFTSCHED_TEST_WORKERS:-$(( $(nproc) >= 2 ? $(nproc) + 1 : 1 ))}"
parallel=()
if [ "$workers" -gt 1 ]; then
  # a worker that crashes fails the pass at once: pytest-xdist 3.8 can hang for good after replacing a crashed
  # worker under --dist loadfile (pytest-dev/pytest-xdist#1378), and a crash is a defect to see, not to retry past
  parallel=(-n "$workers" --dist loadfile --max-worker-restart=0)
fi
fault_workers="${RAFTSCHED_FAULT_WORKERS:-$(( $(nproc) >= 2 ? 2 : 1 ))}"
fault_parallel=()
if [ "$fault_workers" -gt 1 ]; then
  fault_parallel=(-n "$fault_workers" --dist loadfile --max-worker-restart=0)
fi
status=0
echo "== pass 1 of 3: unit, contract and integration tiers (${workers} worker(s))"
"$py" -m pytest -q --durations=10 "${parallel[@]}" -m "not fault and not alone" || status=$?
echo "== pass 2 of 3: the fault tier (${fault_workers} worker(s), one file each at a time)"
"$py" -m pytest -q --durations=15 "${fault_parallel[@]}" -m "fault and not alone" || status=$(( status ? status : $? ))
echo "== pass 3 of 3: the timed tests (marked alone), one test at a time"
"$py" -m pytest -q --durations=5 -m "alone" || status=$(( status ? status : $? ))
if [ "$status" -ne 0 ]; then
  echo "== the suite FAILED (exit status $status): see the failures above" >&2
fi
exit "$status"
