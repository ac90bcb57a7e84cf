"""What a benchmark run reports: targets and verdicts, the table on stdout, bench.json, series.json, plots.

``RESULT_KEYS`` are the keys bench.json always has (``None`` when not
measured, with the reason in ``notes``); ``TARGETS`` what each verdict is
judged on. bench.json also holds ``targets``, ``verdicts``, ``notes``,
``details`` (``Bench.extra``), ``timeline`` and ``duration_s``; series.json
holds ``series`` and ``timeline``, from which ``bench.plots`` draws.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from bench import stats as st
from bench.harness.context import Bench

#: key -> (target, higher_is_better, what the verdict is judged on)
TARGETS: dict[str, tuple[float, bool, str]] = {
    "create_jobs_per_s": (3000.0, True, "CreateJob/s with concurrent clients through all nodes"),
    "create_jobs_batched_per_s": (3000.0, True, "jobs/s created by concurrent clients through CreateJobs (100 per call)"),
    "fire_lag_ms.p99": (50.0, False, "p99 of observed_at - scheduled_time (ms) at the fire rate"),
    "burst_fire_s": (10.0, False, "seconds from the common instant until all burst jobs fired (100k in the full run)"),
    "failover_resume_s.median": (
        1.2,
        False,
        "seconds from SIGKILL of the leader to the next committed fire (median of the kills)",
    ),
    "failover_resume_s.max": (3.0, False, "seconds from SIGKILL of the leader to the next committed fire (worst of the kills)"),
    "failover_leader_s.max": (5.0, False, "seconds from SIGKILL of the leader until the survivors agree on a new one (worst)"),
    "e2e_runs_per_s": (2000.0, True, "fire -> lease -> no-op -> complete per second with 4 executor processes"),
    "due_to_leased_ms.p99": (100.0, False, "p99 of lease grant time - scheduled_time (ms) with idle, waiting executors"),
    "security_e2e_ratio": (0.8, True, "e2e runs/s with TLS + tokens + fsync on, over the same with all three off"),
    "security_create_batched_ratio": (0.8, True, "CreateJobs jobs/s with TLS + tokens + fsync on, over the same off"),
    "lease_grants_shaped_ratio": (0.85, True, "lease grants/s on runs over 10 priorities and 1,000 concurrency keys, over plain"),
    "worker_vs_executor.ratio": (0.9, True, "e2e runs/s of the SDK's Worker (no-op task) over `raftsched executor` (no-op)"),
}

#: the keys bench.json always has (None when not measured, with a reason in notes)
RESULT_KEYS = (
    "raw_raft_commits_per_s",
    "create_jobs_per_s",
    "create_jobs_batched_per_s",
    "grpc_noop_calls_per_s",
    "fire_lag_ms",
    "fire_lag_ms_clamped",
    "fire_rate",
    "burst_fire_s",
    "e2e_runs_per_s",
    "due_to_leased_ms",
    "lease_grants_per_s",
    "lease_grants_shaped_ratio",
    "etcd_lease_grants_per_s",
    "failover_resume_s",
    "failover_leader_s",
    "security_e2e_ratio",
    "security_create_batched_ratio",
    "node_rss_mb",
    "node_cpu_s",
    "machine",
)

#: the table's rows, in order
TABLE_KEYS = (
    "raw_raft_commits_per_s",
    "raw_raft_commits_per_s_pysyncobj_journal",
    "create_jobs_per_s",
    "create_jobs_batched_per_s",
    "grpc_noop_calls_per_s",
    "fire_rate",
    "fire_lag_ms",
    "fire_lag_ms_clamped",
    "burst_fire_s",
    "failover_leader_s",
    "failover_resume_s",
    "lease_grants_per_s",
    "e2e_runs_per_s",
    "due_to_leased_ms",
    "lease_grants_plain_per_s",
    "lease_grants_shaped_per_s",
    "lease_grants_shaped_ratio",
    "etcd_lease_grants_per_s",
    "security_create_batched_ratio",
    "security_e2e_ratio",
    "node_rss_mb",
    "node_cpu_s",
)
#: rows shown only when measured (opt-in scenarios)
OPTIONAL_TABLE_KEYS = (
    "e2e_runs_per_s_metrics",
    "worker_vs_executor",
    "steady_runs_per_s",
    "steady_cpu_us_per_run",
    "steady_due_to_leased_ms",
)


def lookup(results: dict[str, Any], dotted: str) -> Any:
    cur: Any = results
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def verdicts(results: dict[str, Any]) -> dict[str, str]:
    return {k: st.verdict(lookup(results, k), target, higher) for k, (target, higher, _) in TARGETS.items()}


def fmt(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    if isinstance(v, dict):
        return ", ".join(f"{k} {fmt(x)}" for k, x in v.items() if k not in ("count",))
    return str(v)


def _target_of(key: str, v: dict[str, str]) -> tuple[str, str]:
    """The target column (``>= 3000``, ``<= 1.2 (median), <= 3 (max)``) and the verdict of a row (fail when any of
    its targets fails); empty without a target."""
    shown, verdicts_ = [], []
    for tk, (target, higher, _) in TARGETS.items():
        if tk == key or tk.startswith(key + "."):
            shown.append(f"{'>=' if higher else '<='} {target:g}" + (f" ({tk.split('.', 1)[1]})" if "." in tk else ""))
            verdicts_.append(v[tk])
    if not shown:
        return ("", "")
    verdict = "fail" if "fail" in verdicts_ else "pass" if "pass" in verdicts_ else "n/a"
    return (", ".join(shown), verdict)


def _rows(results: dict[str, Any], notes: dict[str, str]) -> list[tuple[str, str, str, str]]:
    v = verdicts(results)
    rows = []
    for key in TABLE_KEYS + tuple(k for k in OPTIONAL_TABLE_KEYS if k in results):
        val = results.get(key)
        t, verdict = _target_of(key, v)
        shown = fmt(val)
        if val is None and key in notes:
            shown = "null (" + notes[key][:60] + ")"
        rows.append((key, shown, t, verdict))
    return rows


def table(results: dict[str, Any], notes: dict[str, str]) -> str:
    """The table printed at the end: metric, value, target, verdict; then the notes worth reading."""
    rows = _rows(results, notes)
    w0 = max(len(r[0]) for r in rows)
    w1 = min(70, max(len(r[1]) for r in rows))
    w2 = max(len(r[2]) for r in rows)
    lines = [f"{'metric':<{w0}}  {'value':<{w1}}  {'target':<{w2}}  verdict", "-" * (w0 + w1 + w2 + 15)]
    for k, val, t, verdict in rows:
        lines.append(f"{k:<{w0}}  {val:<{w1}}  {t:<{w2}}  {verdict}")
    flagged = [k for k, _, _, verdict in rows if verdict == "fail" or results.get(k) is None or "WARNING" in notes.get(k, "")]
    if "machine" in notes:
        flagged.append("machine")
    if flagged:
        lines.append("")
        lines += [f"note {k}: {notes[k]}" for k in flagged if k in notes]
    return "\n".join(lines)


def bench_doc(b: Bench) -> dict[str, Any]:
    """bench.json: every ``RESULT_KEYS`` key (a note for each ``None``), targets, verdicts, notes, details."""
    for key in RESULT_KEYS:
        b.results.setdefault(key, None)
        if b.results[key] is None and key not in b.notes:
            b.notes[key] = "not measured in this run (scenario skipped or failed; see the log above)"
    doc = dict(b.results)
    doc["targets"] = {k: {"target": t, "better": "higher" if h else "lower", "what": what} for k, (t, h, what) in TARGETS.items()}
    doc["verdicts"] = verdicts(b.results)
    doc["notes"] = b.notes
    doc["details"] = b.extra
    doc["timeline"] = b.timeline
    doc["duration_s"] = round(time.monotonic() - b.t0, 1)
    return doc


def write_outputs(b: Bench) -> None:
    """bench.json, series.json and the plots in ``b.out_dir`` (a plot failure is reported, not raised)."""
    os.makedirs(b.out_dir, exist_ok=True)
    with open(os.path.join(b.out_dir, "bench.json"), "w", encoding="utf-8") as f:
        json.dump(bench_doc(b), f, indent=2, sort_keys=False, default=str)
        f.write("\n")
    with open(os.path.join(b.out_dir, "series.json"), "w", encoding="utf-8") as f:
        json.dump({"series": b.series, "timeline": b.timeline}, f)
    try:
        from bench import plots  # matplotlib loads only here, never in the client processes

        made = plots.plot_all(b.series, b.timeline, b.out_dir)
        if made:
            b.say(f"plots: {', '.join(made)}")
    except Exception as exc:  # noqa: BLE001 - plots are a convenience; the numbers are written already
        b.say(f"plots failed: {exc!r}")
