"""Explicit plain-value encoding of job specs for the Raft log, and plain views of records.

``job_to_plain``/``run_to_plain`` give a record's full plain form (to compare
replicas' states in tests and tools); snapshots use their own compact codec
(``raftsched.cluster.fsm.layout``).

Every record becomes a dict of str/int/float/bool/list values that JSON can
carry; bytes travel as base64. Nothing here pickles, and nothing depends on
grpc or pysyncobj. ``spec_fingerprint`` gives the stable identity used for
idempotency keys.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from raftsched.cluster.domain.model import (
    DEFAULT_FAILED_HISTORY_LIMIT,
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_HISTORY_TTL_MS,
    After,
    At,
    ConcurrencyPolicy,
    Cron,
    Every,
    Job,
    JobSpec,
    MisfirePolicy,
    NotifyRule,
    RetryPolicy,
    Run,
    Schedule,
    TimeWindow,
)

Plain = dict[str, Any]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    """Strict: anything but well-formed base64 text raises ValueError (a corrupt entry, not empty bytes)."""
    if not isinstance(text, str):
        raise ValueError(f"expected base64 text, got {type(text).__name__}")
    return base64.b64decode(text.encode("ascii"), validate=True)


def schedule_to_plain(schedule: Schedule) -> Plain:
    if isinstance(schedule, At):
        return {"k": "at", "ms": schedule.at_ms}
    if isinstance(schedule, After):
        return {"k": "after", "ms": schedule.after_ms}
    if isinstance(schedule, Every):
        return {"k": "every", "ms": schedule.every_ms}
    return {"k": "cron", "expr": schedule.expression, "tz": schedule.timezone}


def schedule_from_plain(p: Plain) -> Schedule:
    kind = p["k"]
    if kind == "at":
        return At(int(p["ms"]))
    if kind == "after":
        return After(int(p["ms"]))
    if kind == "every":
        return Every(int(p["ms"]))
    if kind == "cron":
        return Cron(str(p["expr"]), str(p["tz"]))
    raise ValueError(f"unknown schedule kind {kind!r}")


def retry_to_plain(r: RetryPolicy) -> Plain:
    return {
        "max": r.max_attempts,
        "init": r.initial_backoff_ms,
        "cap": r.max_backoff_ms,
        "mul": r.multiplier,
        "jit": r.jitter,
    }


def retry_from_plain(p: Plain) -> RetryPolicy:
    return RetryPolicy(int(p["max"]), int(p["init"]), int(p["cap"]), float(p["mul"]), float(p["jit"]))


def spec_to_plain(s: JobSpec) -> Plain:
    return {
        "name": s.name,
        "sched": schedule_to_plain(s.schedule),
        "queue": s.queue,
        "type": s.type,
        "payload": b64(s.payload),
        "retry": retry_to_plain(s.retry),
        "ttl": s.lease_ttl_ms,
        "timeout": s.timeout_ms,
        "conc": s.concurrency.value,
        "misfire": s.misfire.value,
        "catchup": s.catchup_window_ms,
        "hlimit": s.history_limit,
        "httl": s.history_ttl_ms,
        # only when not the default: a default spec's plain form (and fingerprint) stays what it always was
        **({} if s.failed_history_limit == DEFAULT_FAILED_HISTORY_LIMIT else {"flimit": s.failed_history_limit}),
        **extras_to_plain(s),
    }


#: the plain keys of the fields a spec stores only when they are not their defaults (command format 5)
_EXTRA_KEYS = (
    ("start", "start_ms"), ("end", "end_ms"), ("jit", "jitter_ms"), ("sdates", "skip_dates"),
    ("swin", "skip_windows"), ("crons", "extra_crons"), ("maxr", "max_runs"), ("paf", "pause_after_failures"),
    ("toc", "trigger_on_create"), ("labels", "labels"), ("pttl", "pending_ttl_ms"), ("prio", "priority"),
    ("ckey", "concurrency_key"), ("climit", "concurrency_limit"), ("notify", "notify"),
)  # fmt: skip
_DEFAULT = JobSpec("", Every(1000))


#: the API's name of a format 5 field, where it is not the attribute's
_API_NAMES = {"start_ms": "start_time", "end_ms": "end_time", "jitter_ms": "jitter", "pending_ttl_ms": "pending_ttl"}


def extras_named(s: JobSpec) -> list[str]:
    """The JobSpec fields of command format 5 that the spec sets, as the API names them, in its order."""
    if not has_extras(s):
        return []
    return [_API_NAMES.get(attr, attr) for _key, attr in _EXTRA_KEYS if getattr(s, attr) != getattr(_DEFAULT, attr)]


def has_extras(s: JobSpec) -> bool:
    """Whether the spec sets any field of command format 5 (``SCHEDULES_FORMAT``)."""
    return s[len(_DEFAULT) - len(_EXTRA_KEYS) :] != _DEFAULT[len(_DEFAULT) - len(_EXTRA_KEYS) :]


def extras_to_plain(s: JobSpec) -> Plain:
    """The format 5 fields of a spec that are not their defaults, as plain values (nothing for most specs)."""
    if not has_extras(s):
        return {}
    out: Plain = {}
    for key, attr in _EXTRA_KEYS:
        value = getattr(s, attr)
        if value == getattr(_DEFAULT, attr):
            continue
        if attr == "skip_windows":
            value = [[w.start_ms, w.end_ms] for w in value]
        elif attr == "extra_crons":
            value = [{"expr": c.expression, "tz": c.timezone} for c in value]
        elif attr == "labels":
            value = dict(value)
        elif attr == "notify":
            value = [{"ev": list(r.events), "url": r.url, **({"sec": r.secret_name} if r.secret_name else {})} for r in value]
        elif attr == "skip_dates":
            value = list(value)
        out[key] = value
    return out


def extras_from_plain(p: Plain) -> dict[str, Any]:
    """The keyword arguments of a spec's format 5 fields from its plain form (none for most specs)."""
    out: dict[str, Any] = {}
    for key, attr in _EXTRA_KEYS:
        if key not in p:
            continue
        value = p[key]
        if attr == "skip_windows":
            value = tuple(TimeWindow(int(a), int(b)) for a, b in value)
        elif attr == "extra_crons":
            value = tuple(Cron(str(c["expr"]), str(c["tz"])) for c in value)
        elif attr == "labels":
            if not isinstance(value, dict):
                raise TypeError(f"a spec's labels are a map of keys to values, not {type(value).__name__}")
            value = tuple(sorted((str(k), str(v)) for k, v in value.items()))
        elif attr == "notify":
            value = tuple(NotifyRule(tuple(str(e) for e in r["ev"]), str(r["url"]), str(r.get("sec", ""))) for r in value)
        elif attr == "skip_dates":
            value = tuple(str(d) for d in value)
        elif attr == "trigger_on_create":
            value = bool(value)
        elif attr == "concurrency_key":
            value = str(value)
        else:
            value = int(value)
        out[attr] = value
    return out


def spec_from_plain(p: Plain) -> JobSpec:
    return JobSpec(
        name=str(p["name"]),
        schedule=schedule_from_plain(p["sched"]),
        queue=str(p["queue"]),
        type=str(p["type"]),
        payload=unb64(p["payload"]),
        retry=retry_from_plain(p["retry"]),
        lease_ttl_ms=int(p["ttl"]),
        timeout_ms=int(p["timeout"]),
        concurrency=ConcurrencyPolicy(p["conc"]),
        misfire=MisfirePolicy(p["misfire"]),
        catchup_window_ms=int(p["catchup"]),
        history_limit=int(p.get("hlimit", DEFAULT_HISTORY_LIMIT)),
        history_ttl_ms=int(p.get("httl", DEFAULT_HISTORY_TTL_MS)),
        failed_history_limit=int(p.get("flimit", DEFAULT_FAILED_HISTORY_LIMIT)),
        **extras_from_plain(p),
    )


def spec_fingerprint(s: JobSpec) -> str:
    """A stable digest of a spec: equal specs, equal digests, on every node and version."""
    canonical = json.dumps(spec_to_plain(s), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def job_to_plain(j: Job) -> Plain:
    return {
        "id": j.job_id,
        "spec": spec_to_plain(j.spec),
        "status": j.status.value,
        "anchor": j.anchor_ms,
        "cursor": j.cursor_ms,
        "next": j.next_fire_ms,
        "created": j.created_ms,
        "updated": j.updated_ms,
        "idem": j.idempotency_key,
        "fires": j.fire_count,
    }


_RUN_INT_FIELDS = (
    "fencing_token",
    "lease_expires_ms",
    "started_ms",
    "finished_ms",
    "skipped_count",
    "skipped_until_ms",
    "not_before_ms",
)
_RUN_STR_FIELDS = ("executor_id", "lease_id", "error", "log_uri")


def run_to_plain(r: Run) -> Plain:
    p: Plain = {
        "id": r.run_id,
        "job": r.job_id,
        "queue": r.queue,
        "sched": r.scheduled_ms,
        "fired": r.fired_ms,
        "attempt": r.attempt,
        "status": r.status.value,
        "manual": r.manual,
        "cancel": r.cancel_requested,
        "result": b64(r.result),
    }
    for name in _RUN_INT_FIELDS + _RUN_STR_FIELDS:
        p[name] = getattr(r, name)
    if r.extra:
        p["extra"] = [[k, b64(v) if isinstance(v, bytes) else v] for k, v in r.extra]
    if r.attempts_raw or r.steps_raw or r.budget_base:  # its history (format 3), as stored
        p["attempts"] = [[b64(x) if isinstance(x, bytes) else x for x in a] for a in r.attempts_raw]
        p["steps"] = [list(x) for x in r.steps_raw]
        p["dropped"] = [r.attempts_dropped, r.steps_dropped, r.budget_base]
    return p
