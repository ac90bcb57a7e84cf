"""Tests for raftsched.cluster.domain.commands (and the spec encoding in raftsched.cluster.domain.spec_codec): the Raft log format."""

from __future__ import annotations

import json
import typing
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.commands import wire as command_registry
from raftsched.cluster.domain.model import (
    After,
    At,
    ConcurrencyPolicy,
    Cron,
    Every,
    JobSpec,
    Member,
    MisfirePolicy,
    NotifyRule,
    RetryPolicy,
    TimeWindow,
)
from raftsched.cluster.domain.spec_codec import spec_fingerprint, spec_from_plain, spec_to_plain

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000

# ------------------------------------------------------------------ strategies

ms = st.integers(min_value=0, max_value=2**53)
text = st.text(max_size=40)
schedules = st.one_of(
    st.builds(At, ms),
    st.builds(After, ms),
    st.builds(Every, st.integers(100, 10**12)),
    st.builds(Cron, text, text),
)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
retries = st.builds(RetryPolicy, st.integers(1, 1000), ms, ms, finite, finite)
specs = st.builds(
    JobSpec,
    name=text,
    schedule=schedules,
    queue=text,
    type=text,
    payload=st.binary(max_size=200),
    retry=retries,
    lease_ttl_ms=ms,
    timeout_ms=ms,
    concurrency=st.sampled_from(list(ConcurrencyPolicy)),
    misfire=st.sampled_from(list(MisfirePolicy)),
    catchup_window_ms=ms,
    failed_history_limit=st.integers(1, 100_000),
    start_ms=ms,
    end_ms=ms,
    jitter_ms=ms,
    skip_dates=st.lists(text, max_size=3).map(tuple),
    skip_windows=st.lists(st.builds(TimeWindow, ms, ms), max_size=3).map(tuple),
    extra_crons=st.lists(st.builds(Cron, text, text), max_size=3).map(tuple),
    max_runs=ms,
    pause_after_failures=st.integers(0, 1000),
    trigger_on_create=st.booleans(),
    labels=st.dictionaries(text, text, max_size=4).map(lambda d: tuple(sorted(d.items()))),
    pending_ttl_ms=ms,
    priority=st.integers(0, 9),
    concurrency_key=text,
    concurrency_limit=st.integers(0, 1000),
    notify=st.lists(st.builds(NotifyRule, st.lists(text, max_size=3).map(tuple), text, text), max_size=2).map(tuple),
)
items = st.lists(st.tuples(text, ms), max_size=20).map(tuple)

commands = st.one_of(
    st.builds(c.CreateJob, ms, text, specs, text, text),
    st.builds(c.UpdateJob, ms, text, specs),
    st.builds(c.PauseJob, ms, text),
    st.builds(c.PauseJob, ms, text, text, text, ms),
    st.builds(c.ResumeJob, ms, text),
    st.builds(c.DeleteJob, ms, text),
    st.builds(c.TriggerJob, ms, text),
    st.builds(c.CancelRun, ms, text),
    st.builds(c.CancelRun, ms, text, text),
    st.builds(c.TriggerJob, ms, text, st.integers(0, 10), text),
    st.builds(c.TriggerJob, ms, text, st.integers(0, 10), text, st.binary(max_size=50)),
    st.builds(c.BackfillJob, ms, text, ms, ms, st.integers(0, 10)),
    st.builds(c.ExpirePending, ms, st.lists(text, max_size=5).map(tuple)),
    st.builds(c.RetryRun, ms, text, text, st.integers(0, 10), text),
    st.builds(c.Fire, ms, items, ms, ms),
    st.builds(c.Fire, ms, items, ms, ms, st.integers(0, 10), text, st.integers(0, 100)),
    st.builds(c.Barrier, ms),
    st.builds(c.AcquireLeases, ms, text, st.lists(text, max_size=5).map(tuple), st.integers(0, 10**6)),
    st.builds(c.RenewLeases, ms, text, st.lists(st.tuples(text, ms), max_size=5).map(tuple)),
    st.builds(c.CompleteRun, ms, text, ms, st.booleans(), st.binary(max_size=50), text, text, finite),
    st.builds(c.ExpireLeases, ms, st.lists(st.tuples(text, ms, finite), max_size=5).map(tuple)),
    st.builds(c.GraceLeases, ms, ms),
    st.builds(c.PruneHistory, ms, st.integers(0, 10**6)),
    st.builds(c.NodeInfo, ms, text, text, st.integers(1, 2), text),
    st.builds(c.SeedMembers, ms, st.lists(st.builds(Member, text, text, text, text), max_size=5).map(tuple)),
    st.builds(c.AddMember, ms, st.builds(Member, text, text, text, text)),
    st.builds(c.RemoveMember, ms, text),
    st.builds(c.FinishMemberChange, ms, text, st.sampled_from(["add", "remove"])),
    st.builds(c.SetClusterFormat, ms, st.integers(1, c.FORMAT_VERSION)),
)


def test_a_request_id_makes_an_entry_format_3_and_an_older_entry_with_one_is_malformed() -> None:
    assert c.command_format(c.TriggerJob(T0, "j1")) == 1
    assert c.command_format(c.TriggerJob(T0, "j1", request_id="r")) == 3
    assert json.loads(c.encode(c.PauseJob(T0, "j1", "r")))["v"] == 3
    with pytest.raises(c.CommandFormatError, match="request_id needs format 3"):
        c.decode(b'{"op":"pause_job","job_id":"j1","rid":"r","v":1,"now":1}')


def test_the_request_fingerprint_ignores_the_id_quotas_and_a_new_jobs_id() -> None:
    fp = command_registry.request_fingerprint
    assert fp(c.TriggerJob(T0, "j1", 5, "a")) == fp(c.TriggerJob(T0 + 9, "j1", 0, "b"))
    assert fp(c.TriggerJob(T0, "j1")) != fp(c.TriggerJob(T0, "j2"))
    assert fp(c.TriggerJob(T0, "j1")) != fp(c.PauseJob(T0, "j1"))
    spec = JobSpec("n", At(T0 + 1))
    assert fp(c.CreateJob(T0, "j-a", spec, request_id="r")) == fp(c.CreateJob(T0, "j-b", spec, request_id="r"))
    assert fp(c.CreateJob(T0, "j-a", spec)) != fp(c.CreateJob(T0, "j-a", spec._replace(name="m")))


# ------------------------------------------------------------------ round trips


@settings(max_examples=200, deadline=None)
@given(commands)
def test_every_command_round_trips(cmd: c.Command) -> None:
    data = c.encode(cmd)
    assert isinstance(data, bytes)
    back = c.decode(data)
    assert type(back) is type(cmd)
    assert back == cmd
    assert c.encode(back) == data  # the encoding is canonical


@settings(max_examples=200, deadline=None)
@given(specs)
def test_spec_plain_round_trip_keeps_the_fingerprint(spec: JobSpec) -> None:
    plain = json.loads(json.dumps(spec_to_plain(spec)))
    back = spec_from_plain(plain)
    assert back == spec
    assert spec_fingerprint(back) == spec_fingerprint(spec)


EXAMPLES: list[c.Command] = [
    c.CreateJob(T0, "j1", JobSpec("n", Cron("0 9 * * MON-FRI", "Europe/Berlin"), payload=b"\x00\xff"), "key"),
    c.UpdateJob(T0, "j1", JobSpec("n", At(T0 + 1))),
    c.PauseJob(T0, "j1"),
    c.ResumeJob(T0, "j1"),
    c.DeleteJob(T0, "j1"),
    c.TriggerJob(T0, "j1"),
    c.CancelRun(T0, "j1@5"),
    c.CancelRun(T0, "j1@5", "req-1"),
    c.RetryRun(T0, "j1@5", "alice", 10, "req-2"),
    c.RetryRun(T0, "j1@5"),
    c.Fire(T0, (("a", 1), ("b", 2)), 100, 5_000),
    c.Fire(T0, (("a", 1),), 100, 5_000, 0, "n1", 7),
    c.Fire(T0, ()),
    c.Barrier(T0),
    c.NodeInfo(T0, "n1", "0.1.0", 1),
    c.NodeInfo(T0, "n1", "0.2.0", 2, "10.0.0.1:7001"),
    c.SeedMembers(T0, (Member("n1", "10.0.0.1:7001", "10.0.0.1:50051", "10.0.0.1:8081"), Member("n2", "b:1", "b:2"))),
    c.AddMember(T0, Member("n4", "10.0.0.4:7001", "10.0.0.4:50051")),
    c.RemoveMember(T0, "n1"),
    c.FinishMemberChange(T0, "n4", "add"),
    c.SetClusterFormat(T0, 2),
    c.AcquireLeases(T0, "ex-1", ("default", "q2"), 10),
    c.RenewLeases(T0, "ex-1", (("L5001", 5001),)),
    c.CompleteRun(T0, "L5001", 5001, True, b"\x00result", "", "s3://b/k", 0.25),
    c.CompleteRun(T0, "L5001", 5001, False, error="exit 2"),
    c.ExpireLeases(T0, (("L5001", 5001, 0.75),)),
    c.GraceLeases(T0, 2_000),
    c.BackfillJob(T0, "j1", T0 - 60_000, T0),
    c.ExpirePending(T0, ("j1@5",)),
    c.PruneHistory(T0, 5_000),
]


@pytest.mark.parametrize("cmd", EXAMPLES, ids=lambda cmd: type(cmd).__name__)
def test_each_command_type_round_trips(cmd: c.Command) -> None:
    assert c.decode(c.encode(cmd)) == cmd


def test_the_examples_cover_every_command_type() -> None:
    assert {type(cmd) for cmd in EXAMPLES} == set(typing.get_args(c.Command))


def test_wire_format_is_versioned_plain_json() -> None:
    plain = json.loads(c.encode(c.PauseJob(T0, "j1")))
    assert plain == {"v": 1, "op": "pause_job", "now": T0, "job_id": "j1"}  # format 1: readable by a format-1 node
    fire = json.loads(c.encode(c.Fire(T0, (("a", 1),), 100, 5_000)))
    assert fire == {"v": 1, "op": "fire", "now": T0, "items": [["a", 1]], "look": 100, "mis": 5_000}
    create = json.loads(c.encode(c.CreateJob(T0, "j1", JobSpec("n", Every(1_000), payload=b"hi"), "k")))
    assert create["op"] == "create_job" and create["idem"] == "k"
    assert create["spec"]["sched"] == {"k": "every", "ms": 1_000}
    assert create["spec"]["payload"] == "aGk="  # bytes travel as base64, never pickled


def _raw(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def _raw_v(v: int, **fields: object) -> bytes:
    return json.dumps({"v": v, **fields}).encode()


def test_each_entry_carries_the_format_that_introduced_its_command() -> None:
    format_1 = [c.PauseJob(T0, "j1"), c.Barrier(T0), c.NodeInfo(T0, "n1", "0.2.0", 2, "a:1")]
    format_2 = [c.RemoveMember(T0, "n1"), c.SetClusterFormat(T0, 2), c.AddMember(T0, Member("n4", "a:1", "a:2"))]
    assert [json.loads(c.encode(cmd))["v"] for cmd in format_1] == [1, 1, 1]
    assert [json.loads(c.encode(cmd))["v"] for cmd in format_2] == [2, 2, 2]
    newest = max(max([c.format_of(t), *c.field_formats(t).values()]) for t in c.registered_commands())
    # the newest format a command brought is the newest format, but for formats that change only what is stored
    assert newest == max(f for f in range(1, c.FORMAT_VERSION + 1) if f not in c.STATE_ONLY_FORMATS)
    assert all(newest < f <= c.FORMAT_VERSION for f in c.STATE_ONLY_FORMATS)
    # a field a later format added makes the entry of that format, only when it holds something
    assert json.loads(c.encode(c.CompleteRun(T0, "L1", 1, False)))["v"] == 1
    assert json.loads(c.encode(c.CompleteRun(T0, "L1", 1, False, non_retryable=True)))["v"] == c.VERDICT_FORMAT
    assert json.loads(c.encode(c.RenewLeases(T0, "e", (("L1", 1),), (("L1", b"{}"),))))["v"] == c.VERDICT_FORMAT
    with pytest.raises(c.CommandFormatError, match="its 'nr' needs format 4, not 1"):
        c.decode(_raw(v=1, op="complete", now=T0, lease="L1", token=1, ok=False, result="", error="", log="", draw=0.5, nr=True))
    # a node_info without the Raft address (entries from before it was sent) still decodes
    old = c.decode(_raw(v=1, op="node_info", now=T0, node="n1", ver="0.1.0", fmt=1))
    assert old == c.NodeInfo(T0, "n1", "0.1.0", 1, "")


@pytest.mark.parametrize(
    "data, match",
    [
        (_raw_v(c.FORMAT_VERSION + 1, op="barrier", now=T0), f"format version {c.FORMAT_VERSION + 1}"),
        (_raw_v(99, op="barrier", now=T0), f"up to {c.FORMAT_VERSION}"),
        (_raw_v(1, op="compact_everything", now=T0), "unknown command 'compact_everything'"),
        (_raw_v(2, op="teleport", now=T0), "unknown command 'teleport'"),
        (_raw_v(2, op="cluster_format", now=T0, fmt=c.FORMAT_VERSION + 1), f"command format {c.FORMAT_VERSION + 1}"),
    ],
)
def test_what_this_node_cannot_understand_is_unsupported_and_names_both_formats(data: bytes, match: str) -> None:
    with pytest.raises(c.UnsupportedCommand, match=match) as err:
        c.decode(data)
    assert err.value.stops_replica is True
    assert f"up to {c.FORMAT_VERSION}" in str(err.value)
    assert err.value.command_format > c.FORMAT_VERSION or err.value.op in ("compact_everything", "teleport")


def test_a_format_2_command_tagged_format_1_is_malformed_not_unsupported() -> None:
    with pytest.raises(c.CommandFormatError, match="came with format 2") as err:
        c.decode(_raw_v(1, op="member_remove", now=T0, node="n1"))
    assert not isinstance(err.value, c.UnsupportedCommand)


def test_encode_refuses_what_is_not_a_command() -> None:
    with pytest.raises(TypeError, match="not a command"):
        c.encode(object())  # type: ignore[arg-type]


def test_create_without_idempotency_key_field_decodes_to_empty_key() -> None:
    plain = json.loads(c.encode(c.CreateJob(T0, "j1", JobSpec("n", Every(1_000)), "")))
    del plain["idem"]
    cmd = c.decode(json.dumps(plain).encode())
    assert isinstance(cmd, c.CreateJob) and cmd.idempotency_key == ""


# ------------------------------------------------------------------ refusals


_SPEC = spec_to_plain(JobSpec("n", Every(1_000)))


@pytest.mark.parametrize(
    "data, match",
    [
        (b"", "not valid JSON"),
        (b"\xff\xfe\xfd", "not valid JSON"),
        (b"{nope", "not valid JSON"),
        (b"[" * 100_000, "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'"barrier"', "not a JSON object"),
        (b"null", "not a JSON object"),
        (_raw(op="barrier", now=T0), "version None"),
        (_raw(v=c.FORMAT_VERSION + 1, op="barrier", now=T0), f"version {c.FORMAT_VERSION + 1}, which is not supported"),
        (_raw(v=0, op="barrier", now=T0), "version 0"),
        (_raw(v="1", op="barrier", now=T0), "version '1'"),
        (_raw(v=True, op="barrier", now=T0), "version True"),
        (_raw(v=1.0, op="barrier", now=T0), "version 1.0"),
        (_raw(v=1, op="compact_everything", now=T0), "unknown command 'compact_everything'"),
        (_raw(v=1, op=None, now=T0), "unknown command None"),
        (_raw(v=1, now=T0), "unknown command None"),
        (_raw(v=1, op="barrier"), "malformed barrier"),
        (_raw(v=1, op="barrier", now="later"), "malformed barrier"),
        (_raw(v=1, op="barrier", now=[1]), "malformed barrier"),
        (b'{"v":1,"op":"barrier","now":Infinity}', "malformed barrier"),
        (b'{"v":1,"op":"barrier","now":NaN}', "malformed barrier"),
        (_raw(v=1, op="pause_job", now=T0), "malformed pause_job"),
        (_raw(v=1, op="cancel_run", now=T0), "malformed cancel_run"),
        (_raw(v=1, op="create_job", now=T0, job_id="j"), "malformed create_job"),
        (_raw(v=1, op="create_job", now=T0, job_id="j", spec=[]), "malformed create_job"),
        (_raw(v=1, op="create_job", now=T0, job_id="j", spec={**_SPEC, "conc": "NEVER"}), "malformed create_job"),
        (_raw(v=1, op="create_job", now=T0, job_id="j", spec={**_SPEC, "payload": "!!"}), "malformed create_job"),
        (_raw(v=1, op="create_job", now=T0, job_id="j", spec={**_SPEC, "sched": {"k": "hourly"}}), "malformed"),
        (_raw(v=1, op="create_job", now=T0, job_id="j", spec={**_SPEC, "retry": {"max": 3}}), "malformed"),
        (_raw(v=1, op="update_job", now=T0, job_id="j", spec={**_SPEC, "ttl": "long"}), "malformed update_job"),
        (_raw(v=1, op="fire", now=T0, items=[["j", 1]]), "malformed fire"),
        (_raw(v=1, op="fire", now=T0, items=[["j"]], look=0, mis=0), "malformed fire"),
        (_raw(v=1, op="fire", now=T0, items=[["j", 1, 2]], look=0, mis=0), "malformed fire"),
        (_raw(v=1, op="fire", now=T0, items=[7], look=0, mis=0), "malformed fire"),
        (_raw(v=1, op="fire", now=T0, items=None, look=0, mis=0), "malformed fire"),
        (_raw(v=1, op="fire", now=T0, items=[["j", "x"]], look=0, mis=0), "malformed fire"),
        (b'{"v":1,"op":"fire","now":1,"items":[["j",1e999]],"look":0,"mis":0}', "malformed fire"),
        (_raw(v=1, op="acquire", now=T0, exec="e", queues="default", max=1), "malformed acquire"),
        (_raw(v=1, op="renew", now=T0, exec="e", leases="L1"), "malformed renew"),
        (_raw(v=1, op="fire", now=T0, items="j", look=0, mis=0), "malformed fire"),
        (_raw(v=1, op="expire", now=T0, leases={"L1": 1}), "malformed expire"),
        (_raw(v=1, op="acquire", now=T0, exec="e", queues=["q"], max="lots"), "malformed acquire"),
        (_raw(v=1, op="renew", now=T0, exec="e", leases=[["L1"]]), "malformed renew"),
        (_raw(v=1, op="complete", now=T0, lease="L", token=1, ok=True, result=5, error="", log="", draw=0), "complete"),
        (_raw(v=1, op="complete", now=T0, lease="L1", token=1, ok=True, result="", error="", log=""), "complete"),
        (_raw(v=1, op="expire", now=T0, leases=[["L1", 1]]), "malformed expire"),
        (_raw(v=1, op="grace", now=T0), "malformed grace"),
        (_raw(v=5, op="create_job", now=T0, job_id="j", spec={**_SPEC, "labels": None}), "labels are a map"),
        (_raw(v=5, op="update_job", now=T0, job_id="j", spec={**_SPEC, "labels": ["a", "b"]}), "labels are a map"),
    ],
)
def test_unknown_or_malformed_entries_raise_command_format_error(data: bytes, match: str) -> None:
    with pytest.raises(c.CommandFormatError, match=match):
        c.decode(data)


def test_unknown_version_message_says_to_upgrade() -> None:
    with pytest.raises(c.CommandFormatError, match="upgrade this node"):
        c.decode(_raw(v=99, op="barrier", now=T0))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_escape_as_another_exception(data: bytes) -> None:
    try:
        c.decode(data)
    except c.CommandFormatError:
        pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def _json_answer(read: Callable[[bytes], Any], data: bytes) -> tuple[str, Any]:
    """What ``read(data)`` gives: ("value", it) or ("error", its type and message)."""
    try:
        return ("value", read(data))
    except (ValueError, RecursionError) as exc:
        return ("error", (type(exc).__name__, str(exc)))


_UTF8_NOT_ASCII = json.dumps({"name": "r\u00e9sum\u00e9 \u65e5\u672c \U0001f600"}, ensure_ascii=False).encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(
    value=json_values,
    around=st.sampled_from(["", " ", "\n\t", "\ufeff"]),
    tail=st.sampled_from(["", " ", "x", "}", ",1"]),
    encoding=st.sampled_from(["utf-8", "utf-16", "utf-32"]),
)
def test_the_fast_json_reader_answers_as_json_loads(value: object, around: str, tail: str, encoding: str) -> None:
    """``command_registry.loads`` reads a command's object with json's C scanner directly: for any bytes (an
    object or not, whitespace or a byte-order mark around it, extra text after it, another encoding) it gives
    json.loads's value or json.loads's own error, so every replica decodes an entry as before."""
    data = (around + json.dumps(value) + tail).encode(encoding)
    assert _json_answer(command_registry.loads, data) == _json_answer(json.loads, data)


@pytest.mark.parametrize(
    "data",
    [b"{}", b'{"a":1}', b'{"a":1} ', b'{"a":1}x', b'{"a":', b"{\xff}", b'{"a":"\xed\xa0\x80"}', b'{"a":"\\ud800"}',
     b'{"a":NaN,"b":-Infinity}', b'{"a":1e999}', b"{" * 100_000, _UTF8_NOT_ASCII],
)  # fmt: skip
def test_the_fast_json_reader_answers_as_json_loads_on_edge_cases(data: bytes) -> None:
    assert _json_answer(command_registry.loads, data) == _json_answer(json.loads, data)


@settings(max_examples=200, deadline=None)
@given(commands)
def test_an_entry_is_the_json_that_json_dumps_writes(cmd: c.Command) -> None:
    plain = json.loads(c.encode(cmd))
    assert c.encode(cmd) == json.dumps(plain, separators=(",", ":")).encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(
    op=st.sampled_from(["create_job", "update_job", "pause_job", "cancel_run", "fire", "barrier", "nope"]),
    fields=st.dictionaries(st.sampled_from(["now", "job_id", "spec", "idem", "run_id", "items", "look", "mis"]), json_values),
)
def test_random_json_objects_never_escape_as_another_exception(op: str, fields: dict) -> None:
    data = json.dumps({"v": 1, "op": op, **fields}).encode()
    try:
        c.decode(data)
    except c.CommandFormatError:
        pass


def _leaf_paths(value: object, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaf_paths(v, path + (k,))] + [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaf_paths(v, path + (i,))] + [path]
    return [path]


def _replace(value: object, path: tuple, new: object) -> object:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return copy


@settings(max_examples=200, deadline=None)
@given(cmd=commands, data=st.data())
def test_a_valid_command_with_one_value_corrupted_decodes_or_is_refused(cmd: c.Command, data: st.DataObject) -> None:
    plain = json.loads(c.encode(cmd))
    path = data.draw(st.sampled_from(_leaf_paths(plain)))
    corrupted = _replace(plain, path, data.draw(json_values))
    try:
        c.decode(json.dumps(corrupted).encode())
    except c.CommandFormatError:
        pass


def test_every_command_has_exactly_one_state_machine_handler() -> None:
    from raftsched.cluster.domain import commands as cmds
    from raftsched.cluster.fsm.machine import HANDLERS

    missing = [t.__name__ for t in cmds.registered_commands() if t not in HANDLERS]
    assert missing == []
    assert set(HANDLERS) == set(cmds.registered_commands())
