"""The command line's output formats (-o), how it writes instants and previews, and readable gRPC errors."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import zoneinfo
from typing import Iterator

import grpc
import pytest

from raftsched.cluster.app.cli.cluster import status_text
from raftsched.cluster.app.cli.output import render, render_message, to_plain, to_yaml
from raftsched.cluster.app.cli.timefmt import UTC, local, preview_line, span_text
from raftsched.cluster.app.cli.views import JOB_VIEW, RUN_VIEW
from raftsched.cluster.app.cli.watch import format_event
from raftsched.cluster.domain.unsafe_text import UNSAFE, escape, escape_json
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.errors import ClusterUnreachable, describe, unreachable

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def berlin() -> Iterator[None]:
    """Tables write local time: make it one with DST."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def job(payload: bytes = b'{"command": "date"}') -> pb.Job:
    j = pb.Job(job_id="j-1", status=pb.JOB_STATUS_ACTIVE)
    j.spec.name, j.spec.queue, j.spec.type, j.spec.payload = "tick", "default", "shell", payload
    cv.to_dur(2000, j.spec.every)
    cv.to_ts(1_790_000_000_000, j.next_fire_time)  # 2026-09-21T14:13:20Z
    return j


def test_json_shows_utf8_payloads_as_text_and_others_as_base64() -> None:
    text = to_plain(job())
    assert text["spec"]["payload"] == '{"command": "date"}' and "payload_base64" not in text["spec"]
    binary = to_plain(job(b"\xff\x00\x01"))
    assert "payload" not in binary["spec"] and binary["spec"]["payload_base64"] == "/wAB"
    out = to_plain(pb.RunOutput(run_id="r", log="héllo\n".encode(), result=b"\x80"))
    assert out["log"] == "héllo\n" and out["result_base64"] == "gA==" and "result" not in out


def test_bytes_inside_repeated_messages_are_text_too() -> None:
    resp = pb.ListJobsResponse(jobs=[job(), job(b"\xfe")])
    plain = to_plain(resp)
    assert plain["jobs"][0]["spec"]["payload"] == '{"command": "date"}'
    assert plain["jobs"][1]["spec"]["payload_base64"] == "/g=="


def test_every_format_of_a_list() -> None:
    jobs = [job(), job()]
    table = render("table", JOB_VIEW, jobs).splitlines()
    assert table[0].split()[:3] == ["JOB", "ID", "NAME"] and len(table) == 3
    assert "2026-09-21 16:13:20 CEST" in table[1]  # local time, its zone named
    wide = render("wide", JOB_VIEW, jobs).splitlines()
    assert "PAYLOAD" in wide[0] and '{"command": "date"}' in wide[1]
    assert render("id", JOB_VIEW, jobs) == "j-1\nj-1"
    lines = render("jsonl", JOB_VIEW, jobs).splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["job_id"] == "j-1"
    doc = json.loads(render("json", JOB_VIEW, jobs))
    assert [j["status"] for j in doc["jobs"]] == ["JOB_STATUS_ACTIVE"] * 2
    assert json.loads(render("json", JOB_VIEW, [], single=False)) == {"jobs": []}
    assert json.loads(render("json", JOB_VIEW, jobs[:1], single=True))["spec"]["every"] == "2s"


def test_yaml_is_the_json_document() -> None:
    yaml = pytest.importorskip("yaml")
    for value in [
        to_plain(pb.ListJobsResponse(jobs=[job(), job(b"\xfe")])),
        {"a": "yes", "b": "1.5", "c": "x: y", "d": "#no", "e": "", "f": [], "g": {}, "h": [{"i": None}], "j": "- z"},
        {"text": "line\nnext", "unicode": "héllo", "n": 3, "t": True, "f": 1.25, "s": " lead", "colon": "a:b"},
        {"spans": ["1d", "1h30m", "500ms", "2s"], "numbers": ["12", "1e5", "0x1f", "1.5"]},
    ]:
        assert yaml.safe_load(to_yaml(value)) == value
    assert render("yaml", JOB_VIEW, [job()], single=True).splitlines()[0] == "job_id: j-1"


def test_run_table_and_watch_lines() -> None:
    r = pb.Run(run_id="j-1@5", status=pb.RUN_STATUS_LEASED, attempt=1, executor_id="w1")
    cv.to_ts(1_790_000_000_100, r.scheduled_time)
    cv.to_ts(1_790_000_000_000, r.fired_at)
    rows = render("table", RUN_VIEW, [r]).splitlines()
    assert "2026-09-21 16:13:20.100 CEST" in rows[1] and "2026-09-21 16:13:20.000 CEST" in rows[1] and "on w1" in rows[1]
    ev = pb.RunEvent(run=r, kind="leased", index=12, position=3)
    assert format_event("id", ev) == "j-1@5"
    assert json.loads(format_event("jsonl", ev))["index"] == "12"  # uint64: a string, as protobuf's JSON has it
    assert "12.3" in format_event("wide", ev) and "leased" in format_event("table", ev)
    assert format_event("yaml", ev).startswith("---\nrun:")


def test_messages_without_a_table_and_ids() -> None:
    s = pb.ClusterStatus(leader_id="n2")
    assert render_message("table", s, lambda: "text", "n2") == "text"
    assert render_message("id", s, lambda: "text", "n2") == "n2"
    assert json.loads(render_message("json", s, lambda: "", "n2")) == {"leader_id": "n2"}


#: a name stored before names were checked: clears the screen, rings, writes a title, and reverses what follows
HOSTILE = "ok\x1b[2J\x07\x1b]0;pwned\x07\u202egnp.exe\x9b31m\nfake row"


def _raw_controls(text: str) -> list[str]:
    return [ch for ch in text if ch in UNSAFE and ch != "\n"]


def test_tables_escape_control_and_bidi_characters_of_every_cell() -> None:
    j = job()
    j.spec.name, j.spec.queue = HOSTILE, "q\u2066"
    for fmt in ("table", "wide"):
        out = render(fmt, JOB_VIEW, [j])
        assert _raw_controls(out) == [] and len(out.splitlines()) == 2  # one row: the name's newline is escaped
        assert "ok\\x1b[2J\\x07\\x1b]0;pwned\\x07\\u202egnp.exe\\x9b31m\\nfake row" in out
        assert "q\\u2066" in out
    r = pb.Run(run_id="r\x1b", status=pb.RUN_STATUS_FAILED, error="boom\x1b[31m\u202e", executor_id="w\x07")
    assert _raw_controls(render("wide", RUN_VIEW, [r])) == []
    assert _raw_controls(render("id", RUN_VIEW, [r])) == []
    ev = pb.RunEvent(run=r, kind="finished")
    assert _raw_controls(format_event("wide", ev)) == [] and "\\x1b" in format_event("table", ev)


def test_text_views_escape_what_a_node_sent_and_keep_their_own_lines() -> None:
    s = pb.ClusterStatus(leader_id="n1")
    out = render_message("table", s, lambda: "line one \x1b[2J\u202e\nline two", "n1")
    assert out.splitlines() == ["line one \\x1b[2J\\u202e", "line two"]
    s.pending_by_queue[HOSTILE] = 3  # a queue name from before names were checked
    s.members.add(id="n1\x1b", raft_address="127.0.0.1:7001")
    out = render_message("table", s, lambda: status_text(s), "n1")
    assert (
        _raw_controls(out) == [] and "\\nfake row 3" in out and not any(line.startswith("fake row") for line in out.splitlines())
    )


def test_json_and_yaml_stay_the_same_values_with_no_raw_control_character() -> None:
    j = job()
    j.spec.name = HOSTILE
    for fmt in ("json", "jsonl"):
        out = render(fmt, JOB_VIEW, [j])
        assert [ch for ch in out if ch in UNSAFE and ch != "\n"] == []
        doc = json.loads(out)
        assert (doc["jobs"][0] if fmt == "json" else doc)["spec"]["name"] == HOSTILE
    assert json.loads(render("json", JOB_VIEW, [j], single=True))["spec"]["name"] == HOSTILE
    assert json.loads(format_event("json", pb.RunEvent(run=pb.Run(run_id=HOSTILE))))["run"]["run_id"] == HOSTILE
    yaml_text = render("yaml", JOB_VIEW, [j], single=True)
    assert _raw_controls(yaml_text) == []
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(yaml_text)["spec"]["name"] == HOSTILE


def test_escape_writes_each_unsafe_character_visibly() -> None:
    assert escape("a\x1bb\tc\r\n\x00\x7f\x85\u200e\u2029") == "a\\x1bb\\tc\\r\\n\\x00\\x7f\\x85\\u200e\\u2029"
    assert escape("x\ny\x1b", keep_newlines=True) == "x\ny\\x1b"
    assert escape("plain: ünïcode 日本 🚀") == "plain: ünïcode 日本 🚀"
    assert escape_json('{"a": "\u202e\x9b"}') == '{"a": "\\u202e\\u009b"}'


def test_preview_lines_in_the_jobs_zone_with_utc_beside() -> None:
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    ms = int(dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC).timestamp() * 1000)
    assert preview_line(ms, berlin, "repeated hour") == (
        "Sun 2026-10-25 02:30:00 CEST (UTC+02:00)  2026-10-25T00:30:00Z  repeated hour"
    )
    assert preview_line(ms + 3_600_000, berlin) == "Sun 2026-10-25 02:30:00 CET (UTC+01:00)  2026-10-25T01:30:00Z"
    assert preview_line(ms, UTC) == "Sun 2026-10-25 00:30:00 UTC"  # UTC once
    assert preview_line(ms + 250, UTC, "note") == "Sun 2026-10-25 00:30:00 UTC  note"


def test_local_times_and_spans() -> None:
    assert local(None) == "-"
    assert local(1_790_000_000_123, millis=True) == "2026-09-21 16:13:20.123 CEST"
    now_ms = int(time.time() * 1000)
    assert len(local(now_ms, millis=True, today_short=True)) == len("16:13:20.123")
    assert [span_text(ms) for ms in (0, 500, 2000, 5_400_000, 90_061_001, -30_000)] == [
        "0s",
        "500ms",
        "2s",
        "1h30m",
        "1d1h1m1s1ms",
        "-30s",
    ]


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_grpc_errors_read_as_one_line() -> None:
    refused = FakeRpcError(
        grpc.StatusCode.UNAVAILABLE,
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused",
    )
    assert unreachable(refused)
    assert describe(refused).startswith("UNAVAILABLE: failed to connect") and "\n" not in describe(refused)
    no_leader = FakeRpcError(grpc.StatusCode.UNAVAILABLE, "no leader\nyet; retry")
    assert not unreachable(no_leader) and describe(no_leader) == "UNAVAILABLE: no leader yet; retry"
    assert unreachable(FakeRpcError(grpc.StatusCode.UNKNOWN, "Stream removed"))
    assert not unreachable(FakeRpcError(grpc.StatusCode.NOT_FOUND, "run r-x not found"))
    tls = FakeRpcError(
        grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; Ssl handshake failed: CERTIFICATE_VERIFY_FAILED"
    )
    assert "--ca-file" in describe(tls)
    down = ClusterUnreachable(["127.0.0.1:1", "127.0.0.1:2"], refused, "local-cluster/client.toml")
    assert str(down) == (
        "no node of the cluster answers at 127.0.0.1:1, 127.0.0.1:2: is it running? (addresses from local-cluster/client.toml)"
    )
    assert describe(down) == str(down) and down.code() == grpc.StatusCode.UNAVAILABLE
    assert "--ca-file" in str(ClusterUnreachable(["h:1"], tls))


def test_yaml_shows_enums_and_durations_as_the_flags_write_them_and_json_stays_protobufs() -> None:
    yaml = pytest.importorskip("yaml")
    j = job()
    j.spec.misfire, j.spec.concurrency = pb.MISFIRE_POLICY_FIRE_ALL, pb.CONCURRENCY_POLICY_FORBID
    cv.to_dur(86_400_000, j.spec.catchup_window)
    cv.to_dur(1500, j.spec.retry.initial_backoff)
    doc = yaml.safe_load(render("yaml", JOB_VIEW, [j], single=True))
    assert (doc["status"], doc["spec"]["misfire"], doc["spec"]["concurrency"]) == ("active", "fire_all", "forbid")
    spans = (doc["spec"]["catchup_window"], doc["spec"]["every"], doc["spec"]["retry"]["initial_backoff"])
    assert spans == ("1d", "2s", "1s500ms")
    assert doc["next_fire_time"] == "2026-09-21T14:13:20Z"  # instants stay RFC 3339
    assert "  catchup_window: 1d\n" in render("yaml", JOB_VIEW, [j], single=True)  # plain, as typed
    listed = yaml.safe_load(render("yaml", JOB_VIEW, [j, j]))
    assert [x["spec"]["misfire"] for x in listed["jobs"]] == ["fire_all", "fire_all"]
    s = pb.ClusterStatus(leader_id="n1")
    s.members.add(id="n1", role=pb.MEMBER_ROLE_LEADER)
    assert yaml.safe_load(render_message("yaml", s, lambda: "", "n1"))["members"][0]["role"] == "leader"
    ev = pb.RunEvent(run=pb.Run(run_id="r", status=pb.RUN_STATUS_DEAD_LETTER), kind="finished")
    assert yaml.safe_load(format_event("yaml", ev).removeprefix("---\n"))["run"]["status"] == "dead_letter"
    # JSON is for scripts: protobuf's JSON mapping, as it was
    plain = json.loads(render("json", JOB_VIEW, [j], single=True))
    assert (plain["spec"]["misfire"], plain["spec"]["catchup_window"]) == ("MISFIRE_POLICY_FIRE_ALL", "86400s")


def test_run_cancel_says_the_executor_is_asked_and_when_the_run_ends() -> None:
    from raftsched.cluster.app.cli.runs import cancel_note

    r = pb.Run(run_id="j-1@5", status=pb.RUN_STATUS_LEASED, executor_id="w1", cancel_requested=True)
    cv.to_ts(1_790_000_030_000, r.lease_expires_at)
    note = cancel_note(r, 30_000)
    assert note.startswith("cancel requested: the executor on w1 is asked to stop run j-1@5 at its next lease renewal")
    assert "(within about 10s: executors renew every third of a lease's TTL, 30s for this job)" in note
    assert "stays LEASED until it has stopped, then it is CANCELLED" in note and "2026-09-21 16:13:50 CEST" in note
    assert "within about" not in cancel_note(r, None)
    row = render("table", RUN_VIEW, [r]).splitlines()[1]
    assert row.endswith("on w1, cancel requested")


def test_run_watch_count_counts_runs_not_changes() -> None:
    from raftsched.cluster.app.cli.watch import RunCount

    changes = [("a", "fired"), ("a", "leased"), ("b", "fired"), ("a", "finished"), ("b", "leased"), ("c", "skipped")]
    counted = RunCount([])
    assert [counted.add(pb.RunEvent(run=pb.Run(run_id=r), kind=k)) for r, k in changes] == [0, 0, 0, 1, 1, 2]
    leased = RunCount(["leased"])
    counts = [leased.add(pb.RunEvent(run=pb.Run(run_id=r), kind=k)) for r, k in changes + [("a", "leased")]]
    assert counts == [0, 1, 1, 1, 2, 2, 2]  # a run leased again counts once
