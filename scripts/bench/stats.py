"""Pure statistics helpers for the benchmark (``scripts/bench.py``, ``scripts/backlog.py``): no I/O,
no clock, no third-party imports.

Conventions: times are plain numbers in one unit chosen by the caller
(milliseconds or seconds); a window ``[start, end)`` includes its start and
excludes its end; an empty input gives ``None`` rather than a made-up number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TypeVar

V = TypeVar("V")


def percentile(values: Iterable[float], p: float) -> float | None:
    """The p-th percentile (0..100) with linear interpolation between closest ranks.

    The same definition as numpy's default ("linear", type 7): the value at
    rank ``p/100 * (n-1)`` of the sorted data, interpolated between the two
    neighbouring ranks. ``None`` for no data.
    """
    if not 0.0 <= p <= 100.0 or math.isnan(p):
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return float(data[0])
    rank = p / 100.0 * (len(data) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(data) - 1)
    frac = rank - lo
    return float(data[lo]) + (float(data[hi]) - float(data[lo])) * frac


def median(values: Iterable[float]) -> float | None:
    return percentile(values, 50.0)


def summarize(
    values: Iterable[float], percentiles: Sequence[float] = (50.0, 99.0), ndigits: int | None = 3
) -> dict[str, float | int | None]:
    """``{count, min, mean, p50, p99, max}`` (keys ``pNN`` for each asked percentile).

    With no data every statistic is ``None`` and ``count`` is 0.
    """
    data = sorted(values)
    out: dict[str, float | int | None] = {"count": len(data)}

    def rnd(x: float | None) -> float | None:
        return None if x is None or ndigits is None else round(x, ndigits)

    out["min"] = rnd(float(data[0])) if data else None
    out["mean"] = rnd(math.fsum(data) / len(data)) if data else None
    for p in percentiles:
        out[_pkey(p)] = rnd(percentile(data, p)) if data else None
    out["max"] = rnd(float(data[-1])) if data else None
    return out


def _pkey(p: float) -> str:
    return f"p{int(p)}" if float(p).is_integer() else "p" + f"{p:g}".replace(".", "_")


def clamp_nonnegative(values: Iterable[float]) -> list[float]:
    """``max(0, x)`` of each value: lags where an early (look-ahead) commit counts as on time."""
    return [x if x > 0 else 0.0 for x in values]


def rate(count: int, seconds: float) -> float | None:
    """Events per second; ``None`` for an empty or negative span."""
    if seconds <= 0:
        return None
    return count / seconds


def in_window(times: Iterable[float], start: float, end: float) -> list[float]:
    """The times within ``[start, end)``."""
    return [t for t in times if start <= t < end]


def rate_in_window(times: Iterable[float], start: float, end: float, per: float = 1.0) -> float | None:
    """How many of ``times`` fall in ``[start, end)``, per ``per`` units of time.

    With times in milliseconds pass ``per=1000`` for a rate per second.
    """
    span = end - start
    if span <= 0:
        return None
    n = sum(1 for t in times if start <= t < end)
    return n * per / span


def counter_rate(samples: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    """The rate of a growing counter over ``[start, end]`` from ``(time, value)`` samples in time order.

    Uses the last sample at or before ``start`` and the last one at or before
    ``end``; ``None`` when either is missing or they are the same sample.
    """
    before = [s for s in samples if s[0] <= start]
    upto = [s for s in samples if s[0] <= end]
    if not before or not upto:
        return None
    (t0, v0), (t1, v1) = before[-1], upto[-1]
    if t1 <= t0:
        return None
    return (v1 - v0) / (t1 - t0)


def counter_at(samples: Sequence[tuple[float, float]], t: float) -> float | None:
    """The value of a sampled counter at ``t``: its last sample at or before ``t`` (``None`` before any)."""
    value = None
    for when, v in samples:
        if when > t:
            break
        value = v
    return value


def counter_reached(samples: Sequence[tuple[float, float]], level: float) -> float | None:
    """The time of the first sample at or above ``level`` (an upper bound on when the counter got there)."""
    return next((when for when, v in samples if v >= level), None)


def counter_per_bucket(samples: Sequence[tuple[float, float]], origin: float, bucket: float, end: float) -> list[float]:
    """The counter's growth in each bucket ``[origin + k*bucket, origin + (k+1)*bucket)`` up to ``end``,
    read from the samples (growth is credited to the bucket of the sample that first shows it)."""
    out: list[float] = []
    start = counter_at(samples, origin) or 0
    k = 0
    while origin + k * bucket < end:
        upto = counter_at(samples, origin + (k + 1) * bucket - 1e-9)
        value = start if upto is None else upto
        out.append(value - start)
        start = value
        k += 1
    return out


def histogram(times: Iterable[float], origin: float, bucket: float = 1.0, end: float | None = None) -> list[int]:
    """Counts per bucket of width ``bucket`` from ``origin``: bucket k holds ``[origin + k*b, origin + (k+1)*b)``.

    Empty buckets in between are zeros; times before ``origin`` (or at/after
    ``end`` when given) are left out. With ``end`` the list covers exactly
    ``ceil((end - origin) / bucket)`` buckets.
    """
    if bucket <= 0:
        raise ValueError("bucket width must be positive")
    counts: dict[int, int] = {}
    for t in times:
        if t < origin or (end is not None and t >= end):
            continue
        k = int((t - origin) // bucket)
        counts[k] = counts.get(k, 0) + 1
    if end is not None:
        n = max(0, math.ceil((end - origin) / bucket))
    else:
        n = max(counts) + 1 if counts else 0
    return [counts.get(k, 0) for k in range(n)]


def per_second(times_ms: Iterable[float], origin_ms: float, end_ms: float | None = None) -> list[int]:
    """Counts per whole second since ``origin_ms`` for times in milliseconds."""
    return histogram(times_ms, origin_ms, 1000.0, end_ms)


def steady_rate(completions: Iterable[float], warmup: float = 0.0, cooldown: float = 0.0, per: float = 1.0) -> float | None:
    """Rate of completions between ``first + warmup`` and ``last - cooldown``.

    For a closed-loop load: leaves out the ramp-up and the tail where
    clients stop one by one. ``None`` when the trimmed window is empty.
    """
    data = sorted(completions)
    if len(data) < 2:
        return None
    start, end = data[0] + warmup, data[-1] - cooldown
    if end <= start:
        return None
    return rate_in_window(data, start, end, per)


def phase_spread(times: Iterable[float], period: float, buckets: int = 10) -> dict[str, float | int | None]:
    """How evenly instants spread over a period (e.g. jobs ``every 1s`` across the second).

    Returns the per-bucket counts of ``t mod period`` and ``peak_ratio``: the
    fullest bucket over the mean (1.0 = perfectly even, ``buckets`` = all in one).
    """
    if period <= 0 or buckets <= 0:
        raise ValueError("period and buckets must be positive")
    counts = [0] * buckets
    n = 0
    for t in times:
        k = int((t % period) / period * buckets)
        counts[min(k, buckets - 1)] += 1
        n += 1
    mean = n / buckets
    return {"count": n, "buckets": counts, "peak_ratio": (max(counts) / mean) if n else None}  # type: ignore[dict-item]


def first_after(events: Iterable[tuple[float, float]], after: float) -> float | None:
    """Given ``(key, observed)`` pairs, the earliest ``observed`` among those with ``key > after``.

    Failover: keys are the runs' fired_at, observed the watcher's observed_at;
    the answer is when the first fire committed after a kill was seen.
    """
    best: float | None = None
    for key, observed in events:
        if key > after and (best is None or observed < best):
            best = observed
    return best


def verdict(value: float | None, target: float, higher_is_better: bool) -> str:
    """``pass``/``fail`` against a target, ``n/a`` when there is no measured value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    ok = value >= target if higher_is_better else value <= target
    return "pass" if ok else "fail"


def dedupe_earliest(samples: Iterable[tuple[str, float, V]]) -> dict[str, tuple[float, V]]:
    """``(key, observed, value)`` samples seen by several watchers -> key: the earliest (observed, value)."""
    out: dict[str, tuple[float, V]] = {}
    for key, observed, value in samples:
        known = out.get(key)
        if known is None or observed < known[0]:
            out[key] = (observed, value)
    return out
