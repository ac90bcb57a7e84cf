"""This checkout against another revision, in one window: ``python scripts/bench_compare.py --against REV -- ARGS``.

A benchmark's absolute figures move with the host (a shared machine's speed
drifts by more than most changes within the hour), so a claim about speed is
a ratio to a baseline measured in the same window. ``--against REV`` builds
REV in a git worktree of this repository (its own venv, made by its own
``scripts/bootstrap.sh``; or ``--against-dir`` names a checkout prepared
before), then runs each side's own ``scripts/bench.py`` with the same
arguments, alternated A B B A (``--rounds`` pairs): a drift during the window
weighs on both sides alike. Each run writes its ``bench.json`` under
``--out``; the table lists every figure both sides reported: each run's
value (``-`` for a run that did not report it, as a ``steady`` run whose
cluster fell behind), the medians of the runs that did, and the ratio of the
medians oriented so that above 1 is this checkout doing better
(this/against for a figure where higher is better, against/this where
lower is). Figures with no known direction show this/against.

Derived figures: ``create_call_ratio`` (CreateJob single calls per second
over the same run's no-op gRPC ceiling), ``node_cpu_s.total`` (CPU seconds
of all nodes over the run: the same work on both sides only for scenarios
of a fixed amount of work, such as ``burst``; ``create`` and ``leases`` run
for a fixed time and do as much as they can), ``node_rss_mb.max``, and ``<figure>.followers`` (the mean of a
per-role figure's followers, e.g. ``steady_cpu_us_per_run``). Figures per
node name are not compared: which node leads differs between runs.

``--same-bench`` runs this checkout's ``scripts/bench.py`` for both sides,
the against side with ``--nodes-from`` its checkout: its nodes and executors,
this checkout's scenarios, clients and measures. That compares a scenario
the other version's own benchmark does not have (``steady``: what a run
costs each node, due->leased at a fixed rate) on exactly the same load.

Nothing is started here but the two benchmarks (one at a time, each
stopping its own processes) and git and the bootstrap script; the worktree
is removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import report
from bench import stats as st

#: the sides: the revision built in a worktree, and this checkout
AGAINST, THIS = "against", "this"
#: a figure's direction when ``report.TARGETS`` does not name it: by the end of its key
_HIGHER_ENDS = ("_per_s", "_ratio", ".ratio")
_LOWER_ENDS = ("_s", "_ms", ".min", ".p50", ".p90", ".p99", ".max", ".median", ".mean", "_mb", ".total", "_per_run")
#: figures per node: their node names differ between runs (who leads), so only what is derived from them is compared
_PER_NODE = ("node_cpu_s", "node_rss_mb")
#: how a run that did not report a figure shows in the table
MISSING = "-"


def order(rounds: int) -> list[str]:
    """The sides in running order: A B B A, repeated ``rounds // 2`` times (an odd last round is A B)."""
    out: list[str] = []
    for k in range(rounds):
        out += [AGAINST, THIS] if k % 2 == 0 else [THIS, AGAINST]
    return out


def flatten(doc: dict[str, Any]) -> dict[str, float]:
    """The numeric figures of one ``bench.json``: top-level numbers, one level of dotted numbers (``fire_lag_ms.p99``),
    and the derived ones (see the module docstring). Counts, notes and the machine are left out."""
    out: dict[str, float] = {}
    skip = {"machine", "targets", "verdicts", "notes", "details"}
    for key, value in doc.items():
        if key in skip:
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[key] = float(value)
        elif isinstance(value, dict) and key not in _PER_NODE:
            followers = []
            for sub, v in value.items():
                if sub == "count" or not isinstance(v, (int, float)) or isinstance(v, bool):
                    continue
                if sub.startswith("follower"):  # named by node: which ones follow differs between runs
                    followers.append(float(v))
                else:
                    out[f"{key}.{sub}"] = float(v)
            if followers:  # (``steady_cpu_us_per_run``: "leader", "follower n2", ...)
                out[f"{key}.followers"] = sum(followers) / len(followers)
    create, noop = doc.get("create_jobs_per_s"), doc.get("grpc_noop_calls_per_s")
    if isinstance(create, (int, float)) and isinstance(noop, (int, float)) and noop > 0:
        out["create_call_ratio"] = create / noop
    for key, name, fold in (("node_cpu_s", "total", sum), ("node_rss_mb", "max", max)):
        per_node = doc.get(key)
        if isinstance(per_node, dict) and per_node and all(isinstance(v, (int, float)) for v in per_node.values()):
            out[f"{key}.{name}"] = float(fold(per_node.values()))
    return out


def higher_is_better(key: str) -> bool | None:
    """Whether a larger value of the figure is better (None: not known)."""
    if key in report.TARGETS:
        return report.TARGETS[key][1]
    if key.endswith(_HIGHER_ENDS):
        return True
    if key.endswith(_LOWER_ENDS) or key.startswith("steady_cpu_us_per_run."):
        return False
    return None


Row = tuple[str, list[float | None], list[float | None], float | None]


def rows(runs: list[tuple[str, dict[str, float]]]) -> list[Row]:
    """(figure, against's values, this checkout's values, ratio: above 1 is this checkout doing better) for every
    figure each side reported in at least one of its runs, in key order. A run that did not report it (a ``steady``
    run whose cluster fell behind has no figures) shows None in its place; the medians are of the runs that did."""

    def seen(side: str) -> set[str]:
        return set().union(*(set(f) for s, f in runs if s == side))

    both = sorted(seen(AGAINST) & seen(THIS))
    out: list[Row] = []
    for key in both:
        a = [figures.get(key) for side, figures in runs if side == AGAINST]
        b = [figures.get(key) for side, figures in runs if side == THIS]
        ma, mb = st.median([v for v in a if v is not None]), st.median([v for v in b if v is not None])
        higher = higher_is_better(key)
        ratio: float | None = None
        if ma is not None and mb is not None:
            num, den = (ma, mb) if higher is False else (mb, ma)
            ratio = num / den if den else None
        out.append((key, a, b, ratio))
    return out


def table(against: str, found: list[Row]) -> str:
    """The comparison as text: one line per figure."""
    lines = [
        f"{'figure':<32}  {'against ' + against[:12]:<26}  {'this checkout':<26}  ratio (>1: this better)",
        "-" * 112,
    ]
    for key, a, b, ratio in found:
        higher = higher_is_better(key)
        note = "" if higher is not None else "  (this/against: direction unknown)"
        shown = "n/a" if ratio is None else f"{ratio:.3f}"
        a_s = ", ".join(MISSING if v is None else report.fmt(v) for v in a)
        b_s = ", ".join(MISSING if v is None else report.fmt(v) for v in b)
        lines.append(f"{key:<32}  {a_s:<26}  {b_s:<26}  {shown}{note}")
    if any(v is None for _, a, b, _ in found for v in a + b):
        lines.append(f"{MISSING}: a run that did not report the figure (its bench.json's notes say why); medians of the others")
    return "\n".join(lines)


def _run(cmd: list[str], cwd: Path, log: Path, timeout: float) -> None:
    with open(log, "w") as out:
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with exit {done.returncode}: see {log}")


def side_command(
    side: str, bench_args: list[str], folder: Path, repo: Path, against_dir: Path, against_python: Path, same_bench: bool
) -> tuple[list[str], Path]:
    """The command that runs ``side``'s benchmark into ``folder``, and its working directory: each side's own
    ``scripts/bench.py``, or with ``same_bench`` this checkout's for both, the against side's nodes and executors
    run from its checkout (``--nodes-from``)."""
    if side == THIS:
        return [sys.executable, "scripts/bench.py", *bench_args, "--out", str(folder)], repo
    if same_bench:
        return [sys.executable, "scripts/bench.py", *bench_args, "--nodes-from", str(against_dir), "--out", str(folder)], repo
    return [str(against_python), "scripts/bench.py", *bench_args, "--out", str(folder)], against_dir


def _build(repo: Path, rev: str, where: Path, log: Path) -> Path:
    """REV checked out at ``where`` (a detached worktree) with its own venv; the venv's python."""
    _run(["git", "-C", str(repo), "worktree", "add", "--detach", str(where), rev], repo, log, 120)
    bootstrap = where / "scripts" / "bootstrap.sh"
    if not bootstrap.exists():
        raise SystemExit(f"{rev} has no scripts/bootstrap.sh: prepare a checkout with a .venv and pass --against-dir")
    _run([str(bootstrap), "dev"], where, log, 1800)
    return where / ".venv" / "bin" / "python"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--against", required=True, help="the revision to compare with (a commit, tag or branch)")
    ap.add_argument("--against-dir", help="a checkout of --against with its .venv made already (nothing is built)")
    ap.add_argument("--rounds", type=int, default=2, help="pairs of runs, alternated A B B A (default 2)")
    ap.add_argument("--out", default="bench-compare", help="where each run's bench.json goes (default bench-compare/)")
    ap.add_argument("--keep", action="store_true", help="keep the worktree built for --against")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds one benchmark run may take (default 1800)")
    ap.add_argument(
        "--same-bench",
        action="store_true",
        help="both sides under this checkout's scripts/bench.py, the other's nodes and executors run from its checkout "
        "(bench.py --nodes-from): the same scenarios and measures, for scenarios the other's bench.py lacks "
        "(cluster scenarios only)",
    )
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="after --: arguments for both sides' scripts/bench.py")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    bench_args = [a for a in args.bench_args if a != "--"]
    if any(a.startswith("--out") for a in bench_args):
        ap.error("give --out to the comparison, not to bench.py: each run gets a folder of its own under it")
    if any(a.startswith("--nodes-from") for a in bench_args):
        ap.error("--nodes-from is the comparison's to give: use --same-bench")
    repo = Path(__file__).resolve().parents[2]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    built: Path | None = None
    try:
        if args.against_dir:
            against_dir = Path(args.against_dir).resolve()
            against_python = against_dir / ".venv" / "bin" / "python"
            if not against_python.exists():
                ap.error(f"{against_dir} has no .venv/bin/python: run its scripts/bootstrap.sh dev first")
        else:
            built = Path(tempfile.mkdtemp(prefix="raftsched-against-")) / "checkout"
            print(f"building {args.against} in {built} (log {out / 'build.log'})", flush=True)
            against_python = _build(repo, args.against, built, out / "build.log")
            against_dir = built
        runs: list[tuple[str, dict[str, float]]] = []
        for n, side in enumerate(order(args.rounds), start=1):
            folder = out / f"{n:02d}-{side}"
            cmd, where = side_command(side, bench_args, folder, repo, against_dir, against_python, args.same_bench)
            print(f"run {n}: {side} ({against_dir if side == AGAINST else repo}) -> {folder}", flush=True)
            _run(cmd, where, out / f"{n:02d}-{side}.log", args.timeout)
            with open(folder / "bench.json") as f:
                runs.append((side, flatten(json.load(f))))
        text = table(args.against, rows(runs))
        print(text)
        (out / "compare.txt").write_text(text + "\n")
        return 0
    finally:
        if built is not None and not args.keep:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(built)], check=False)
            shutil.rmtree(built.parent, ignore_errors=True)
