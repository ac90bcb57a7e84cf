"""PNG plots of a benchmark run (matplotlib, Agg backend).

``plot_all(series, timeline, out_dir)`` draws what the series hold and
returns the file names written. It can also be run on its own to redraw the
plots from a saved ``series.json`` (from the ``scripts/`` folder, where the
``bench`` package lives):

    cd scripts && python -m bench.plots ../bench-out/series.json [OUT_DIR]
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend is chosen before pyplot loads

from bench import stats as st  # noqa: E402

_MARKS = {
    "kill": ("red", "SIGKILL leader"),
    "restart": ("grey", "restart"),
    "leader": ("green", "new leader seen"),
    "resumed": ("blue", "first fire after kill"),
}


def _mark_events(ax: Any, timeline: list[dict[str, Any]], origin_ms: int, end_ms: int) -> None:
    seen: set[str] = set()
    for e in timeline:
        style = _MARKS.get(e["event"])
        if style is None or not origin_ms <= e["t_ms"] <= end_ms:
            continue
        color, label = style
        x = (e["t_ms"] - origin_ms) / 1000.0
        ax.axvline(x, color=color, linestyle="--" if e["event"] != "kill" else "-", linewidth=1.2 if e["event"] == "kill" else 0.8,
                   label=None if label in seen else label, alpha=0.8)  # fmt: skip
        if e["event"] == "kill":
            ax.annotate(f"kill {e.get('node', '')}", (x, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                        va="top", ha="right", fontsize=7, color=color)  # fmt: skip
        seen.add(label)


def _shade_window(ax: Any, timeline: list[dict[str, Any]], origin_ms: int) -> None:
    starts = [e["t_ms"] for e in timeline if e["event"] == "fire_lag_window_start"]
    ends = [e["t_ms"] for e in timeline if e["event"] == "fire_lag_window_end"]
    if starts and ends:
        ax.axvspan((starts[0] - origin_ms) / 1000.0, (ends[0] - origin_ms) / 1000.0, color="yellow", alpha=0.15)


def plot_fire_lag(series: dict[str, Any], timeline: list[dict[str, Any]], out_dir: str) -> str | None:
    lag = series.get("fire_lag")
    if not lag or not lag.get("t_ms"):
        return None
    origin, end = lag["start_ms"], lag["end_ms"]
    xs = [(t - origin) / 1000.0 for t in lag["t_ms"]]
    ys = lag["lag_ms"]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(12, 8), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.scatter(
        xs, ys, s=2, alpha=0.4, color="tab:purple", label="fire lag of a run (observed_at - scheduled_time)", rasterized=True
    )
    # per-second p99 as a line
    buckets: dict[int, list[float]] = {}
    for x, y in zip(xs, ys):
        buckets.setdefault(int(x), []).append(y)
    secs = sorted(buckets)
    ax.plot(
        [s + 0.5 for s in secs], [st.percentile(buckets[s], 99) for s in secs], color="black", linewidth=1, label="p99 per second"
    )
    ax.axhline(50, color="orange", linewidth=0.8, linestyle=":", label="target p99 50 ms")
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set_yscale("symlog", linthresh=100)
    ax.set_ylabel("lag (ms, symlog)")
    ax.set_title("Fire lag over time (fire-lag window, then leader SIGKILLs)")
    _mark_events(ax, timeline, origin, end)
    _shade_window(ax, timeline, origin)
    ax.legend(loc="upper left", fontsize=8)
    counts = st.per_second(lag["t_ms"], origin, end)
    ax2.bar([i + 0.5 for i in range(len(counts))], counts, width=1.0, color="tab:blue")
    ax2.set_ylabel("runs fired / s")
    ax2.set_xlabel("seconds since the fire-lag phase began (shaded: the measured fire-lag window)")
    _mark_events(ax2, timeline, origin, end)
    fig.tight_layout()
    path = os.path.join(out_dir, "fire_lag.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return os.path.basename(path)


def plot_fired_per_second(series: dict[str, Any], timeline: list[dict[str, Any]], out_dir: str) -> str | None:
    panels: list[tuple[str, list[float], int, int]] = []  # title, fired per second, origin ms, end ms
    lag = series.get("fire_lag")
    if lag and lag.get("t_ms"):
        panels.append(
            (
                "fire-lag and failover phases (seconds since start of the phase)",
                [float(c) for c in st.per_second(lag["t_ms"], lag["start_ms"], lag["end_ms"])],
                lag["start_ms"],
                lag["end_ms"],
            )
        )
    burst = series.get("burst")
    if burst and burst.get("samples"):
        at = burst["at_ms"]
        samples = [(t, n) for t, n in burst["samples"]]  # ms since the instant, runs fired so far
        end = max(t for t, _ in samples) + 1000
        panels.append(
            (
                f"burst: {max(n for _, n in samples)} jobs due at one instant (seconds since the instant)",
                st.counter_per_bucket(samples, 0.0, 1000.0, end),
                at,
                at + end,
            )
        )
    if not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 3.5 * len(panels)), squeeze=False)
    for ax, (title, counts, origin, end) in zip(axes[:, 0], panels):
        ax.bar([i + 0.5 for i in range(len(counts))], counts, width=1.0, color="tab:blue")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("runs fired / s")
        _mark_events(ax, timeline, origin, end)
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    path = os.path.join(out_dir, "fired_per_second.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return os.path.basename(path)


def plot_burst(series: dict[str, Any], out_dir: str) -> str | None:
    burst = series.get("burst")
    if not burst or not burst.get("samples"):
        return None
    xs = [t / 1000.0 for t, _ in burst["samples"]]
    ys = [n for _, n in burst["samples"]]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.step(xs, ys, where="post", color="tab:green")
    ax.axvline(10, color="orange", linestyle=":", label="target: all within 10 s")
    ax.set_xlabel("seconds after the common instant")
    ax.set_ylabel("runs fired (cumulative)")
    ax.set_title(f"Burst: {max(ys)} jobs due at one instant (a follower's pending count, polled every 50 ms)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    path = os.path.join(out_dir, "burst.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return os.path.basename(path)


def plot_all(series: dict[str, Any], timeline: list[dict[str, Any]], out_dir: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    made = [
        plot_fire_lag(series, timeline, out_dir),
        plot_fired_per_second(series, timeline, out_dir),
        plot_burst(series, out_dir),
    ]
    return [m for m in made if m]


def main(argv: list[str]) -> int:
    """``SERIES_JSON [OUT_DIR]``: redraw the plots of a saved run (into the file's folder by default)."""
    if not argv:
        print(__doc__)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        doc = json.load(f)
    out = argv[1] if len(argv) > 1 else os.path.dirname(os.path.abspath(argv[0]))
    print(", ".join(plot_all(doc["series"], doc["timeline"], out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
