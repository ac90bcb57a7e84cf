#!/usr/bin/env python
"""The table of docs/performance.md, rendered from a benchmark report (``scripts/bench.py``'s bench.json).

    python scripts/perf_page.py [--bench docs/bench.json] [--page docs/performance.md] [--check]

Replaces what lies between the page's two markers (``BEGIN`` and ``END``) with:
the command that made the report and the machine it ran on (cores, memory, CPU
model, Python, as ``results["machine"]`` records them), one row per figure
(scenario, figure, unit, target, met?: the scenario cell names the bench
scenario, what it measures and the report's key), and why each figure without a value
was not measured. Targets and verdicts are the report's own (``targets``,
``verdicts``), so the page says what that run judged. ``--check`` writes
nothing and exits 1 when the page is not what the report renders (the unit
test ``tests/unit/test_docs_site.py`` checks the same).

The usual way: ``python scripts/bench.py --quick``, copy ``bench-out/bench.json``
to ``docs/bench.json``, run this, commit both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "docs", "bench.json")
PAGE = os.path.join(REPO, "docs", "performance.md")
BEGIN = "<!-- perf_page.py: begin (generated from docs/bench.json; do not edit by hand) -->"
END = "<!-- perf_page.py: end -->"

#: report key -> (scenario, what the figure is, unit), in the order of the table
FIGURES: dict[str, tuple[str, str, str]] = {
    "raw_raft_commits_per_s": ("raw_raft", "bare pysyncobj with raftsched's LMDB log: the ceiling", "commits/s"),
    "raw_raft_commits_per_s_pysyncobj_journal": ("raw_raft", "the same with pysyncobj's own file journal", "commits/s"),
    "create_jobs_per_s": ("create", "CreateJob, one job per call, concurrent clients", "jobs/s"),
    "create_jobs_batched_per_s": ("create", "CreateJobs, 100 jobs per call", "jobs/s"),
    "grpc_noop_calls_per_s": ("create", "the same clients against gRPC servers that only answer", "calls/s"),
    "fire_rate": ("fire_lag", "runs coming due", "runs/s"),
    "fire_lag_ms": ("fire_lag", "fire committed minus its instant", "ms"),
    "fire_lag_ms_clamped": ("fire_lag", "the same, early fires counted as 0", "ms"),
    "failover_leader_s": ("failover", "SIGKILL of the leader to a new leader", "s"),
    "failover_resume_s": ("failover", "SIGKILL of the leader to the next committed fire", "s"),
    "burst_fire_s": ("burst", "jobs due at one instant, until all are fired", "s"),
    "lease_grants_per_s": ("leases", "leases granted, 50 per call", "leases/s"),
    "e2e_runs_per_s": ("leases", "fire, lease, no-op, complete, 4 executors", "runs/s"),
    "due_to_leased_ms": ("leases", "instant to lease grant, idle executors", "ms"),
    "etcd_lease_grants_per_s": ("etcd", "a 3-member etcd's LeaseGrant, for comparison", "leases/s"),
    "security_create_batched_ratio": ("security", "CreateJobs with TLS, tokens and fsync, over without", "ratio"),
    "security_e2e_ratio": ("security", "end to end with TLS, tokens and fsync, over without", "ratio"),
    "e2e_runs_per_s_metrics": ("metrics_cost", "end to end, HTTP endpoint off and on (scraped every second)", "runs/s"),
    "worker_vs_executor": ("worker_vs_executor", "end to end, the SDK's Worker against `raftsched executor` (no-op)", "runs/s"),
    "node_rss_mb": ("nodes", "resident memory per node at the end", "MB"),
    "node_cpu_s": ("nodes", "CPU time per node during the run", "s"),
}
#: keys of the report that are not figures
NOT_FIGURES = {"machine", "targets", "verdicts", "notes", "details", "timeline", "duration_s"}
#: the share of a core other processes may take on average before the page says the figures are low
FOREIGN_CORES_NOTED = 0.2


def number(v: float) -> str:
    """``23,472``, ``998``, ``2.58``, ``-65``, ``0.97``: thousands grouped, three significant digits below 100."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def figure(v: Any) -> str:
    """A value as the table shows it: a number, or its parts (``p50 -79, p99 -65``) without the sample count."""
    if v is None:
        return "not measured"
    if isinstance(v, dict):
        return ", ".join(
            f"{k.removesuffix('_pct')} {figure(x)}{' %' if k.endswith('_pct') else ''}" for k, x in v.items() if k != "count"
        )
    if isinstance(v, (int, float)):
        return number(v)
    return str(v)


def unit_of(key: str) -> str:
    """The unit of a figure the table does not list, from its key's suffix."""
    for suffix, unit in (("_per_s", "/s"), ("_ratio", "ratio"), ("_ms", "ms"), ("_mb", "MB"), ("_s", "s")):
        if key.endswith(suffix):
            return unit
    return ""


def target_and_met(key: str, doc: dict[str, Any]) -> tuple[str, str]:
    """The target cell (``>= 3000``, ``<= 1.2 (median), <= 3 (max)``) and the met? cell of a row, as the report judged."""
    targets: dict[str, Any] = doc.get("targets") or {}
    verdicts: dict[str, str] = doc.get("verdicts") or {}
    shown, missed, unmeasured = [], [], 0
    for tk, t in targets.items():
        if tk != key and not tk.startswith(key + "."):
            continue
        part = tk.split(".", 1)[1] if "." in tk else ""
        shown.append(f"{'≥' if t.get('better') == 'higher' else '≤'} {number(t['target'])}" + (f" ({part})" if part else ""))
        verdict = verdicts.get(tk, "n/a")
        if verdict == "fail":
            missed.append(part or "no")
        elif verdict != "pass":
            unmeasured += 1
    if not shown:
        return ("", "")
    if missed:
        return (", ".join(shown), "no" if missed == ["no"] else "no: " + ", ".join(missed))
    return (", ".join(shown), "not measured" if unmeasured else "yes")


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def machine_lines(machine: dict[str, Any]) -> list[str]:
    """The command that made the report and the machine it ran on."""
    command = machine.get("command") or "python scripts/bench.py" + (" --quick" if machine.get("profile") == "quick" else "")
    memory = machine.get("memory_gb")
    lines = [
        f"Measured with `{command}` on {machine.get('cores', 'unknown')} cores ({machine.get('cpu_model', 'unknown CPU')}), "
        f"{f'{memory:g} GB of memory' if memory is not None else 'unknown memory'}, Python {machine.get('python', 'unknown')} "
        f"(pysyncobj {machine.get('pysyncobj', 'unknown')}, grpcio {machine.get('grpcio', 'unknown')}), "
        f"3 nodes on loopback with a Raft secret. The whole report is [bench.json](bench.json)."
    ]
    foreign = (machine.get("other_load") or {}).get("foreign_cores_avg")
    if isinstance(foreign, (int, float)) and foreign > FOREIGN_CORES_NOTED:
        lines.append(
            f"Other processes used {foreign:g} cores on average during the run: the figures are lower than an idle machine's."
        )
    return lines


def render(doc: dict[str, Any]) -> str:
    """The generated region of the page (without the markers)."""
    keys = [k for k in FIGURES if k in doc]
    keys += [k for k in doc if k not in FIGURES and k not in NOT_FIGURES]
    rows = ["| scenario | figure | unit | target | met? |", "|---|---|---|---|---|"]
    unmeasured = []
    for key in keys:
        scenario, what, unit = FIGURES.get(key, ("", key, unit_of(key)))
        if key == "burst_fire_s" and isinstance(burst_jobs := ((doc.get("details") or {}).get("burst") or {}).get("jobs"), int):
            what = f"{burst_jobs:,} {what}"
        target, met = target_and_met(key, doc)
        name = f"`{scenario}`: {cell(what)} (`{key}`)" if scenario else f"`{key}`"
        rows.append(f"| {name} | {cell(figure(doc[key]))} | {unit} | {target} | {met} |")
        if doc[key] is None:
            unmeasured.append(f"- `{key}`: {cell(str((doc.get('notes') or {}).get(key, 'no reason recorded')))}")
    out = "\n\n".join(machine_lines(doc.get("machine") or {})).split("\n") + [""] + rows
    if unmeasured:
        out += ["", "Not measured in this run:", ""] + unmeasured
    return "\n".join(out)


def rendered_page(page: str, doc: dict[str, Any]) -> str:
    """The page with its generated region replaced by what ``doc`` renders."""
    head, sep, rest = page.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"the page has no region between {BEGIN!r} and {END!r}")
    return f"{head}{BEGIN}\n{render(doc)}\n{END}{tail}"


def generated_region(page: str) -> str:
    """What lies between the markers of a page, as ``render`` writes it."""
    return page.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Render the performance page's table from a benchmark report.")
    ap.add_argument("--bench", default=BENCH, help="the report (default docs/bench.json)")
    ap.add_argument("--page", default=PAGE, help="the page (default docs/performance.md)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page differs")
    args = ap.parse_args(argv)
    with open(args.bench, encoding="utf-8") as f:
        doc = json.load(f)
    with open(args.page, encoding="utf-8") as f:
        page = f.read()
    new = rendered_page(page, doc)
    if args.check:
        if new != page:
            print(f"{args.page} is not what {args.bench} renders: run python scripts/perf_page.py", file=sys.stderr)
            return 1
        return 0
    if new != page:
        with open(args.page, "w", encoding="utf-8") as f:
            f.write(new)
        print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
