"""A ``JobSpec`` from keyword arguments: ``create_job``'s, ``update_job``'s and ``worker.schedule``'s.

``build_spec(name, every=|cron= (+ tz=)|at=|after=, type=, queue=, payload=,
max_attempts=, backoff=, **fields)`` makes a new spec; ``change_spec(spec,
**changes)`` lays the given arguments over an existing one (``update_job``).

* Exactly one schedule: ``every``/``after`` are spans (``timedelta``,
  seconds, ``"10s"``, ``"1h30m"``...), ``at`` an aware ``datetime`` or ISO
  text, ``cron`` an expression with ``tz`` its IANA zone (default UTC; ``tz``
  with another schedule is refused: it would be ignored).
* ``payload``: bytes and text as they are, anything else as JSON
  (``raftsched.sdk.codec``).
* ``max_attempts`` and ``backoff`` set the retry policy: ``backoff`` is the
  first retry's delay (a span), or a dict of ``initial``, ``max``,
  ``multiplier``, ``jitter``.
* Any other ``JobSpec`` field by its name (``lease_ttl="1m"``,
  ``timeout=timedelta(minutes=5)``, ``concurrency="forbid"``,
  ``misfire="skip"``, ``history_limit=50``, ``retry={...}``, and fields a
  newer cluster adds): spans and instants as above, enums by their short
  names, messages as dicts. A name the spec does not have is a
  ``TypeError`` naming it and listing the fields there are.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.sdk import codec
from raftsched.sdk.durations import instant_ms, span_ms

SCHEDULES = ("every", "cron", "at", "after")
#: the fields create_job takes by name (the rest come through ``**fields``)
_EXPLICIT = frozenset({"name", "queue", "type", "payload", *SCHEDULES})
_BACKOFF_KEYS = {"initial": "initial_backoff", "max": "max_backoff", "multiplier": "multiplier", "jitter": "jitter"}
_DURATION = "google.protobuf.Duration"
_TIMESTAMP = "google.protobuf.Timestamp"


class _Unset:
    """An argument that was not given (``None`` may mean something for a field)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def build_spec(
    name: str,
    *,
    every: Any = None,
    cron: str | None = None,
    tz: str | None = None,
    at: Any = None,
    after: Any = None,
    type: str = "noop",
    queue: str = "default",
    payload: Any = None,
    max_attempts: int | None = None,
    backoff: Any = None,
    **fields: Any,
) -> pb.JobSpec:
    """A new spec from the arguments (see the module)."""
    if not isinstance(name, str):
        raise TypeError(f"name={name!r}: a job's name is text")
    spec = pb.JobSpec(name=name, type=type, queue=queue, payload=codec.encode(payload, "payload"))
    given = {k: v for k, v in (("every", every), ("cron", cron), ("at", at), ("after", after)) if v is not None}
    if len(given) != 1:
        got = f" (got {', '.join(given)})" if given else ""
        raise TypeError(f"give exactly one schedule: every=, cron= (with tz=), at= or after={got}")
    set_schedule(spec, given, tz)
    set_retry(spec, max_attempts, backoff)
    set_fields(spec, fields)
    return spec


def change_spec(spec: pb.JobSpec, **changes: Any) -> pb.JobSpec:
    """A copy of ``spec`` with the given arguments laid over it (the same arguments as ``build_spec``; a
    schedule replaces the old one, ``tz`` alone changes a cron job's zone, ``payload=None`` empties it)."""
    new = pb.JobSpec()
    new.CopyFrom(spec)
    for key in ("name", "queue", "type"):
        if changes.get(key, UNSET) is not UNSET:
            setattr(new, key, changes.pop(key))
        changes.pop(key, None)
    if "payload" in changes:
        new.payload = codec.encode(changes.pop("payload"), "payload")
    given = {k: changes.pop(k) for k in SCHEDULES if changes.get(k) is not None}
    for k in SCHEDULES:
        changes.pop(k, None)
    tz = changes.pop("tz", None)
    if given:
        if len(given) != 1:
            raise TypeError(f"give at most one schedule: every=, cron= (with tz=), at= or after= (got {', '.join(given)})")
        keep = new.cron.timezone if new.WhichOneof("schedule") == "cron" and "cron" in given else None
        set_schedule(new, given, tz if tz is not None else keep)
    elif tz is not None:
        if new.WhichOneof("schedule") != "cron":
            raise ValueError(f"tz={tz!r} applies only to a cron schedule; this job's is {new.WhichOneof('schedule')}")
        new.cron.timezone = tz
    set_retry(new, changes.pop("max_attempts", None), changes.pop("backoff", None))
    set_fields(new, changes)
    return new


def set_schedule(spec: pb.JobSpec, given: dict[str, Any], tz: str | None) -> None:
    """Set the one schedule in ``given`` (its kind -> value)."""
    ((kind, value),) = given.items()
    if tz is not None and kind != "cron":
        what = "an instant with its own zone" if kind == "at" else "real time"
        raise ValueError(f"tz={tz!r} applies only to cron=; {kind}= counts {what}: drop tz")
    spec.ClearField(kind)
    if kind == "cron":
        if not isinstance(value, str):
            raise TypeError(f"cron={value!r}: give the expression as text, e.g. '30 2 * * *'")
        spec.cron.expression, spec.cron.timezone = value, tz or "UTC"
    elif kind == "at":
        cv.to_ts(instant_ms(value, "at"), spec.at)
    else:
        cv.to_dur(span_ms(value, kind), getattr(spec, kind))


def set_retry(spec: pb.JobSpec, max_attempts: int | None, backoff: Any) -> None:
    """Set the retry policy's attempts and backoff (``None``: leave them as they are)."""
    if max_attempts is not None:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
            raise TypeError(f"max_attempts={max_attempts!r}: give a whole number of attempts (the first included)")
        spec.retry.max_attempts = max_attempts
    if backoff is None:
        return
    if isinstance(backoff, dict):
        unknown = sorted(set(backoff) - set(_BACKOFF_KEYS) - set(_BACKOFF_KEYS.values()))
        if unknown:
            raise TypeError(f"backoff: unknown key(s) {', '.join(unknown)}; give initial, max, multiplier and jitter")
        fill(spec.retry, {_BACKOFF_KEYS.get(k, k): v for k, v in backoff.items()}, "backoff")
    else:
        cv.to_dur(span_ms(backoff, "backoff"), spec.retry.initial_backoff)


def set_fields(spec: pb.JobSpec, fields: dict[str, Any]) -> None:
    """Set each ``JobSpec`` field named in ``fields`` (``None``: leave it as it is)."""
    by_name = spec.DESCRIPTOR.fields_by_name
    for key, value in fields.items():
        if key not in by_name or key in _EXPLICIT:
            others = sorted(set(by_name) - _EXPLICIT - {"retry"})
            raise TypeError(
                f"unknown job field {key!r}: a JobSpec has no such field. Besides the schedule, name, type, queue, "
                f"payload, max_attempts and backoff, give any of: {', '.join(others + ['retry'])}"
            )
        if value is not None:
            assign(spec, by_name[key], value, key)


def fill(msg: Any, value: Any, path: str) -> None:
    """Fill the message ``msg`` from ``value``: a span or instant for Duration and Timestamp, an expression
    (or ``(expression, zone)``) for a CronSchedule, else a dict (or dataclass) of its fields."""
    full = msg.DESCRIPTOR.full_name
    if full == _DURATION:
        cv.to_dur(span_ms(value, path), msg)
        return
    if full == _TIMESTAMP:
        cv.to_ts(instant_ms(value, path), msg)
        return
    if full == "raftsched.v1.CronSchedule" and isinstance(value, (str, tuple)):
        expression, zone = (value, "UTC") if isinstance(value, str) else value
        msg.expression, msg.timezone = expression, zone
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if not isinstance(value, dict):
        raise TypeError(
            f"{path}={value!r}: give a dict of {msg.DESCRIPTOR.name}'s fields ({', '.join(msg.DESCRIPTOR.fields_by_name)})"
        )
    for key, item in value.items():
        field = msg.DESCRIPTOR.fields_by_name.get(key)
        if field is None:
            raise TypeError(
                f"{path}: {msg.DESCRIPTOR.name} has no field {key!r} (it has {', '.join(msg.DESCRIPTOR.fields_by_name)})"
            )
        if item is not None:
            assign(msg, field, item, f"{path}.{key}")


def assign(msg: Any, field: Any, value: Any, path: str) -> None:
    """Set one field of ``msg`` (maps, repeated fields, messages, enums and scalars)."""
    target = getattr(msg, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        if not isinstance(value, dict):
            raise TypeError(f"{path}={value!r}: give a dict")
        entry = field.message_type.fields_by_name["value"]
        for key, item in value.items():
            if entry.message_type is not None:
                fill(target[key], item, f"{path}[{key!r}]")
            else:
                target[key] = _scalar(entry, item, f"{path}[{key!r}]")
        return
    if _is_repeated(field):
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{path}={value!r}: give a list")
        del target[:]
        for i, item in enumerate(value):
            if field.message_type is not None:
                fill(target.add(), item, f"{path}[{i}]")
            else:
                target.append(_scalar(field, item, f"{path}[{i}]"))
        return
    if field.message_type is not None:
        msg.ClearField(field.name)
        fill(getattr(msg, field.name), value, path)
        return
    setattr(msg, field.name, _scalar(field, value, path))


def _is_repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def _scalar(field: Any, value: Any, path: str) -> Any:
    if field.enum_type is not None:
        return enum_value(field.enum_type, value, path)
    if field.type == field.TYPE_BYTES:
        return codec.encode(value, path)
    try:
        if field.type == field.TYPE_BOOL and not isinstance(value, bool):
            raise TypeError("not a bool")
        if field.type == field.TYPE_STRING and not isinstance(value, str):
            raise TypeError("not text")
        if field.cpp_type in (field.CPPTYPE_INT32, field.CPPTYPE_INT64, field.CPPTYPE_UINT32, field.CPPTYPE_UINT64):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError("not a whole number")
        if field.cpp_type in (field.CPPTYPE_DOUBLE, field.CPPTYPE_FLOAT) and (
            isinstance(value, bool) or not isinstance(value, (int, float))
        ):
            raise TypeError("not a number")
    except TypeError as exc:
        raise TypeError(f"{path}={value!r}: {exc}") from None
    return value


def enum_value(enum_type: Any, value: Any, path: str) -> int:
    """An enum value from its short name (``"forbid"``), its full name or its number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    names = [v.name for v in enum_type.values]
    prefix = next((n[: -len("UNSPECIFIED")] for n in names if n.endswith("_UNSPECIFIED")), "")
    if isinstance(value, str):
        wanted = value.strip().upper().replace("-", "_")
        for candidate in (wanted, prefix + wanted):
            if candidate in names:
                return int(enum_type.values_by_name[candidate].number)
    short = [n.removeprefix(prefix).lower() for n in names if not n.endswith("_UNSPECIFIED")]
    raise ValueError(f"{path}={value!r}: give one of {', '.join(short)}")
