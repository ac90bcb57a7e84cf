"""The command line of ``python scripts/bench.py``: flags, the order of a run, clean-up, the exit status.

Exit status: 0 when every scenario asked for ran, 1 when one failed or the
run was interrupted (Ctrl-C or SIGTERM: every process started is stopped
and what was measured is still written), 2 for an unknown scenario.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

from bench.harness.cluster import start_cluster
from bench.harness.context import Bench
from bench.harness.load import LoadMonitor
from bench.harness.pool import WorkerPool
from bench.harness.runtime import from_checkout, this_checkout
from bench.profile import FULL, QUICK, Profile
from bench.report import table, write_outputs
from bench.scenarios import CLUSTER_SCENARIOS, NOT_QUICK_SCENARIOS, OPT_IN_SCENARIOS, SCENARIOS
from bench.scenarios.fire_lag import collect_lag_series
from bench.scenarios.leases import probe_leases
from bench.scenarios.machine import scenario_machine
from bench.scenarios.node_stats import scenario_node_stats

DESCRIPTION = "raftsched benchmark: one command, its own clusters on loopback, a table and bench.json."
#: the share of a core other processes may take on average before the run is flagged
FOREIGN_CORES_WARNING = 0.2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller and shorter: under 4 minutes")
    ap.add_argument("--out", default="bench-out", help="where bench.json, series.json and the plots go (default bench-out/)")
    ap.add_argument(
        "--scenarios",
        default="all",
        help=f"comma-separated subset of: {', '.join(n for n, _ in SCENARIOS)} (default all; a quick run's all leaves out "
        f"{', '.join(sorted(OPT_IN_SCENARIOS | NOT_QUICK_SCENARIOS))})",
    )
    ap.add_argument(
        "--nodes-extra-config",
        default="",
        help="TOML appended to the nodes' cluster.toml (e.g. a [scheduler] table); @FILE reads a file",
    )
    ap.add_argument(
        "--burst-watch",
        choices=("leader", "follower"),
        default="follower",
        help="whose pending count the burst is measured on (default a follower: its apply is never earlier than the commit)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (node logs, data) instead of removing it")
    ap.add_argument("--procs", type=int, default=None, help="client processes (default 4)")
    ap.add_argument("--threads", type=int, default=None, help="threads per client process (default 16)")
    ap.add_argument("--fire-rate", type=int, default=None, help="every-1s jobs for the fire-lag scenario (default 2000)")
    ap.add_argument(
        "--steady-spread",
        type=float,
        default=None,
        metavar="S",
        help="the steady scenario's jobs are created over S seconds, their instants in that part of every second "
        "(default 1: evenly over it; 0.4: in bursts, as a client creating them as fast as it can gets)",
    )
    ap.add_argument("--burst-jobs", type=int, default=None, help="jobs in the burst (default 100000, 20000 with --quick)")
    ap.add_argument(
        "--nodes-from",
        default="",
        metavar="DIR",
        help="run the cluster's nodes and the executors from the raftsched checkout DIR (with its .venv), everything "
        "else from this one: another version under this harness's load (cluster scenarios only)",
    )
    args = ap.parse_args(argv)
    if args.steady_spread is not None and not 0 < args.steady_spread <= 1:
        ap.error(f"--steady-spread {args.steady_spread:g}: give a part of a second, above 0 and at most 1")
    # how this run was started, for bench.json's machine description (and the docs' performance page)
    args.command_line = shlex.join(["python", "scripts/bench.py", *(sys.argv[1:] if argv is None else argv)])
    if args.nodes_extra_config.startswith("@"):
        with open(args.nodes_extra_config[1:], encoding="utf-8") as f:
            args.nodes_extra_config = f.read()
    if args.nodes_extra_config and not args.nodes_extra_config.startswith("\n"):
        args.nodes_extra_config = "\n" + args.nodes_extra_config
    return args


def _profile(args: argparse.Namespace) -> Profile:
    """The full or quick profile with the sizes given on the command line."""
    profile = QUICK if args.quick else FULL
    given = (
        ("fire_rate", args.fire_rate), ("burst_jobs", args.burst_jobs), ("procs", args.procs), ("threads", args.threads),
        ("steady_spread_s", args.steady_spread),
    )  # fmt: skip
    overrides = {k: v for k, v in given if v is not None}
    return Profile(**{**profile.__dict__, **overrides}) if overrides else profile


def _run_group(b: Bench, cluster: bool, failed: list[str]) -> None:
    """The wanted scenarios outside (``cluster=False``) or on the raftsched cluster, in ``SCENARIOS`` order;
    one failing is recorded in ``failed`` and does not lose the others."""
    for name, fn in SCENARIOS:
        if name not in b.wanted or (name in CLUSTER_SCENARIOS) != cluster:
            continue
        # after the raw Raft run (their start-up would steal its CPU); opt-in scenarios bring their own load
        if name != "raw_raft" and name not in OPT_IN_SCENARIOS and b.pool is None:
            b.pool = WorkerPool(b.profile.procs, b.profile.threads, b.say)
        try:
            b.run_scenario(name, fn)
        except Exception as exc:  # noqa: BLE001 - one scenario failing must not lose the others
            failed.append(name)
            b.say(f"scenario {name} failed: {exc!r}\n{traceback.format_exc()}")


def _run(b: Bench, failed: list[str]) -> None:
    scenario_machine(b)
    b.monitor = LoadMonitor().start()
    _run_group(b, False, failed)
    if CLUSTER_SCENARIOS & set(b.wanted):
        if b.pool is None:
            b.pool = WorkerPool(b.profile.procs, b.profile.threads, b.say)
        start_cluster(b)
        probe_leases(b)
        _run_group(b, True, failed)
        scenario_node_stats(b)


def _stop_everything(b: Bench) -> None:
    if "fire_lag" not in b.series:
        collect_lag_series(b)
    b.stop_watchers()
    if b.pool is not None:
        b.pool.close()
    if b.cluster is not None:
        b.cluster.stop_all()


def _record_other_load(b: Bench) -> None:
    """The CPU processes outside the benchmark took during the whole run, into ``machine.other_load``."""
    if b.monitor is None:
        return
    b.monitor.stop()
    _, foreign, busy = b.monitor.snapshot()
    wall = time.monotonic() - b.t0
    load = {
        "foreign_cpu_s": round(foreign, 1),
        "busy_cpu_s": round(busy, 1),
        "foreign_cores_avg": round(foreign / wall, 2),
        "loadavg_at_end": os.getloadavg(),
    }
    if isinstance(b.results.get("machine"), dict):
        b.results["machine"]["other_load"] = load
    if foreign / wall > FOREIGN_CORES_WARNING:
        b.notes["machine"] = (
            f"WARNING: processes outside this benchmark used {foreign / wall:.2f} cores on average during the run "
            "(see details.scenario_load): the numbers are lower than on an idle machine"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    profile = _profile(args)
    left_out = OPT_IN_SCENARIOS | (NOT_QUICK_SCENARIOS if args.quick else set())
    wanted = (
        [n for n, _ in SCENARIOS if n not in left_out]
        if args.scenarios == "all"
        else [s.strip() for s in args.scenarios.split(",") if s.strip()]
    )
    unknown = set(wanted) - {n for n, _ in SCENARIOS}
    if unknown:
        print(f"unknown scenario(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    runtime = this_checkout()
    if args.nodes_from:
        try:
            runtime = from_checkout(args.nodes_from)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.scenarios == "all":
            wanted = [n for n in wanted if n in CLUSTER_SCENARIOS]
        outside = [n for n in wanted if n not in CLUSTER_SCENARIOS]
        if outside:
            print(
                f"--nodes-from runs only the scenarios on the shared cluster ({', '.join(sorted(CLUSTER_SCENARIOS))}); "
                f"not {', '.join(outside)}, which start processes of their own",
                file=sys.stderr,
            )
            return 2

    def on_sigterm(*_: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)  # same clean-up as Ctrl-C: every started process is stopped
    root = tempfile.mkdtemp(prefix="raftsched-bench-", dir="/tmp")
    b = Bench(args, profile, root, os.path.abspath(args.out), wanted=wanted, runtime=runtime)
    b.say(f"raftsched bench ({profile.name}); temp dir {root}; output {b.out_dir}; nodes from {runtime.label}")
    failed: list[str] = []
    try:
        _run(b, failed)
    except KeyboardInterrupt:
        b.say("interrupted: stopping everything")
        failed.append("interrupted")
    finally:
        _stop_everything(b)
    if failed:
        b.notes["failed_scenarios"] = ", ".join(failed)
    _record_other_load(b)
    write_outputs(b)
    print()
    print(table(b.results, b.notes))
    print()
    b.say(f"wrote {os.path.join(b.out_dir, 'bench.json')}; total {time.monotonic() - b.t0:.0f} s")
    if args.keep or failed:
        b.say(f"kept {root} (node logs: {root}/cluster/n*.log)")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0
