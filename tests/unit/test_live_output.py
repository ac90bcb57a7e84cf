"""Live output, the pure part: part names, the plans every store follows to read a log or its live parts from
an offset, where a node looks for a running attempt's parts, and which log GetRunOutput answers with."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from raftsched.cluster.domain.live_output import (
    LogSlice,
    Part,
    is_output_name,
    parse_part,
    part_name,
    plan_live,
    plan_window,
)
from raftsched.cluster.domain.model import Run, RunStatus
from raftsched.cluster.domain.output import OutputKey, OutputMissing
from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.cluster.node.run_output import read_run_output
from raftsched.storage import LocalOutputStore, OutputReader
from raftsched.storage.janitor import OutputJanitor

pytestmark = pytest.mark.unit

LOG = "J/R/attempt-2-token-42.log"
KEY = OutputKey("J", "R", 2, 42)


def parts(*spans: tuple[int, int]) -> list[Part]:
    return [Part(o, n, False, part_name(LOG, o)) for o, n in spans]


def test_part_names_carry_the_offset_and_sort_in_log_order() -> None:
    names = [part_name(LOG, o) for o in (0, 7, 4096, 10**9)]
    assert names[1] == "J/R/attempt-2-token-42.log.part-000000000007"
    assert sorted(names) == names
    assert part_name(LOG, 14, held=True) == LOG + ".part-000000000014.held"
    assert [parse_part(LOG, n) for n in names] == [(0, False), (7, False), (4096, False), (10**9, False)]
    assert parse_part(LOG, LOG + ".part-000000000014.held") == (14, True)
    for other in (LOG, LOG + ".part-7", LOG + ".part-000000000007.tmp", "J/R/attempt-2-token-43.log.part-000000000000"):
        assert parse_part(LOG, other) is None, other
    with pytest.raises(ValueError, match="out of range"):
        part_name(LOG, -1)


@pytest.mark.parametrize(
    "name, ours",
    [
        ("attempt-1-token-9.log", True),
        ("attempt-1-token-9.result", True),
        ("attempt-1-token-9.log.part-000000000000", True),
        ("attempt-1-token-9.log.part-000000000512.held", True),
        ("attempt-1-token-9.log.tmp", True),
        ("attempt-1-token-9.txt", False),
        ("notes.log", False),
        ("attempt-1-token-9.log.part-1", False),
    ],
)
def test_the_janitor_recognises_only_output_names(name: str, ours: bool) -> None:
    assert is_output_name(name) is ours


@pytest.mark.parametrize(
    "size, offset, max_bytes, ranges, next_offset, cut",
    [
        (100, 0, 0, ((0, 100),), 100, False),
        (100, 0, 100, ((0, 100),), 100, False),
        (100, 0, 40, ((0, 20), (80, 100)), 100, True),  # offset 0 over the limit: head + note + tail
        (100, 30, 40, ((30, 70),), 70, False),  # any other offset: a window, to be continued
        (100, 90, 40, ((90, 100),), 100, False),
        (100, 100, 40, (), 100, False),
        (100, 150, 40, (), 150, False),  # past the end: the offset stays where it is
        (0, 0, 40, (), 0, False),
    ],
)
def test_windows_of_a_stored_log(size: int, offset: int, max_bytes: int, ranges: tuple, next_offset: int, cut: bool) -> None:
    w = plan_window(size, offset, max_bytes)
    assert (w.ranges, w.next_offset, w.cut) == (ranges, next_offset, cut)


def test_live_parts_are_read_while_they_follow_each_other() -> None:
    plan = plan_live(parts((0, 7), (7, 7), (14, 5)), 0, 0)
    assert [(p.offset, a, b) for p, a, b in plan.pieces] == [(0, 0, 7), (7, 0, 7), (14, 0, 5)]
    assert (plan.size, plan.next_offset, plan.held) == (19, 19, None)
    plan = plan_live(parts((0, 7), (7, 7), (14, 5)), 10, 0)  # from inside a part
    assert [(p.offset, a, b) for p, a, b in plan.pieces] == [(7, 3, 7), (14, 0, 5)]
    plan = plan_live(parts((0, 7), (20, 5)), 0, 0)  # a gap: the rest is on its way (or lost)
    assert (plan.size, [p.offset for p, _, _ in plan.pieces]) == (7, [0])
    plan = plan_live(parts((7, 7)), 0, 0)  # nothing from byte 0
    assert (plan.size, plan.pieces) == (0, ())


def test_a_reshipped_part_may_be_longer_and_overlaps_are_fine() -> None:
    plan = plan_live(parts((0, 7), (0, 12), (7, 5)), 0, 0)
    assert plan.size == 12 and sum(b - a for _, a, b in plan.pieces) == 12
    assert [(p.size, a, b) for p, a, b in plan.pieces] == [(12, 0, 12)]


def test_a_live_window_is_cut_at_max_bytes_and_continues() -> None:
    spans = parts((0, 10), (10, 10), (20, 10))
    first = plan_live(spans, 0, 15)
    assert [(p.offset, a, b) for p, a, b in first.pieces] == [(0, 0, 10), (10, 0, 5)] and first.next_offset == 15
    second = plan_live(spans, first.next_offset, 15)
    assert [(p.offset, a, b) for p, a, b in second.pieces] == [(10, 5, 10), (20, 0, 10)] and second.next_offset == 30


def test_the_held_note_counts_only_where_the_live_bytes_end() -> None:
    held = Part(14, 30, True, part_name(LOG, 14, True))
    assert plan_live([*parts((0, 7), (7, 7)), held], 0, 0).held == held
    assert plan_live([*parts((0, 7)), held], 0, 0).held is None  # bytes 7..14 are not there yet
    assert plan_live([*parts((0, 7), (7, 7)), held], 20, 0).next_offset == 20  # never backwards


@pytest.mark.parametrize(
    "location, uri, folder",
    [
        (OutputLocation(local_dir="/srv/out"), f"file:///srv/out/{LOG}", "file:///srv/out/J/R/"),
        (OutputLocation(local_dir="/srv/out/"), f"file:///srv/out/{LOG}", "file:///srv/out/J/R/"),
        (OutputLocation(s3_bucket="b", s3_prefix="/raftsched/"), f"s3://b/raftsched/{LOG}", "s3://b/raftsched/J/R/"),
        (OutputLocation(s3_bucket="b"), f"s3://b/{LOG}", "s3://b/J/R/"),
        (OutputLocation(memory=True), f"mem://{LOG}", "mem://J/R/"),
        (OutputLocation(), "", ""),
    ],
)
def test_a_node_computes_where_an_attempt_writes_from_its_lease(location: OutputLocation, uri: str, folder: str) -> None:
    assert location.uri_for(KEY) == uri
    assert location.run_folder("J", "R") == folder
    if uri:
        location.check(uri)  # inside the store by construction


def test_the_computed_uri_is_the_one_the_executor_stores_at(tmp_path: Path) -> None:
    store = LocalOutputStore(str(tmp_path / "out"))
    assert OutputLocation(local_dir=str(tmp_path / "out")).uri_for(KEY) == store.uri_for(KEY)
    odd = OutputKey("../etc", "a/b c", 1, 5)
    assert OutputLocation(local_dir=str(tmp_path / "out")).uri_for(odd) == store.uri_for(odd)


def test_a_symlinked_part_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "out"
    store = LocalOutputStore(str(root))
    store.put_part(KEY, 0, b"mine\n")
    secret = tmp_path / "secret"
    secret.write_bytes(b"not yours")
    os.symlink(secret, str(root / (LOG + ".part-000000000005")))
    reader = OutputReader(location=OutputLocation(local_dir=str(root)))
    assert reader.read_live(KEY, 0) == LogSlice(b"mine\n", 5, 5)


def test_live_output_needs_a_location() -> None:
    with pytest.raises(OutputMissing, match="no output location"):
        OutputReader().read_live(KEY, 0)


# ---------------------------------------------------------------------------- which log GetRunOutput answers


class Reader:
    """A node's OutputReader with one stored log per URI and live parts per key."""

    def __init__(self, stored: dict[str, bytes] | None = None, live: dict[OutputKey, bytes] | None = None) -> None:
        self.stored, self.live, self.calls = stored or {}, live or {}, []  # type: ignore[var-annotated]

    def read(self, uri: str) -> tuple[bytes, bytes]:
        raise AssertionError("GetRunOutput reads from an offset")

    def read_at(self, uri: str, offset: int) -> tuple[LogSlice, bytes]:
        self.calls.append(("stored", uri, offset))
        if uri not in self.stored:
            raise OutputMissing(f"{uri} is gone")
        data = self.stored[uri]
        return LogSlice(data[offset:], len(data), max(offset, len(data))), b"stored result"

    def read_live(self, key: OutputKey, offset: int) -> LogSlice:
        self.calls.append(("live", key, offset))
        data = self.live.get(key, b"")
        return LogSlice(data[offset:], len(data), max(offset, len(data)))


def run(status: RunStatus, attempt: int = 2, token: int = 42, log_uri: str = "", error: str = "") -> Run:
    r = Run("R", "J", "q", 1000, 1000, status, attempt)
    r.fencing_token, r.log_uri, r.error, r.result = token, log_uri, error, b"recorded result"
    return r


def test_a_leased_run_answers_with_its_live_output_from_the_offset() -> None:
    reader = Reader(stored={"file:///o/J/R/attempt-1-token-9.log": b"attempt 1"}, live={KEY: b"line 1\nline 2\n"})
    leased = run(RunStatus.LEASED, log_uri="file:///o/J/R/attempt-1-token-9.log")  # left from attempt 1
    out = read_run_output(leased, 0, reader, 7)  # type: ignore[arg-type]
    assert (out.log, out.live, out.next_offset, out.size, out.fencing_token) == (b"line 2\n", True, 14, 14, 42)
    assert (out.log_uri, out.result, out.missing_reason, out.attempt) == ("", b"", "", 2)
    assert reader.calls == [("live", KEY, 7)]


def test_a_finished_attempt_continues_from_the_offset_in_its_stored_log() -> None:
    uri = "file:///o/J/R/attempt-2-token-42.log"
    reader = Reader(stored={uri: b"line 1\nline 2\nline 3\n"})
    out = read_run_output(run(RunStatus.SUCCEEDED, log_uri=uri), 0, reader, 14)  # type: ignore[arg-type]
    assert (out.log, out.live, out.next_offset, out.size, out.result) == (b"line 3\n", False, 21, 21, b"stored result")
    assert out.log_uri == uri and not out.missing_reason


def test_an_earlier_attempts_log_is_not_shown_as_the_latest() -> None:
    earlier = "file:///o/J/R/attempt-1-token-9.log"
    reader = Reader(stored={earlier: b"attempt 1's log"})
    out = read_run_output(run(RunStatus.PENDING, log_uri=earlier, error="lease expired"), 0, reader)  # type: ignore[arg-type]
    assert out.log == b"" and out.missing_reason.startswith("output missing: no log is stored for run R")
    assert ("stored", earlier, 0) not in reader.calls


def test_an_attempt_that_stored_no_log_shows_what_it_shipped_live() -> None:
    reader = Reader(live={KEY: b"partial\n"})
    why = "output missing: storing the log at s3://b/x failed (3 tries in 9 s): unreachable"
    out = read_run_output(run(RunStatus.FAILED, error=f"command failed; {why}"), 0, reader)  # type: ignore[arg-type]
    assert (out.log, out.live, out.missing_reason) == (b"partial\n", False, why)
    assert "was not stored" in out.note
    quiet = Reader()
    out = read_run_output(run(RunStatus.DEAD_LETTER, error="lease expired"), 0, quiet)  # type: ignore[arg-type]
    assert out.log == b"" and not out.note and out.missing_reason.startswith("output missing")
    nothing = Reader()
    read_run_output(run(RunStatus.SUCCEEDED, log_uri="data:,"), 0, nothing)  # type: ignore[arg-type]
    assert all(kind != "live" for kind, *_ in nothing.calls)  # a quiet attempt costs no listing


def test_a_live_read_that_fails_is_a_missing_reason() -> None:
    class Down(Reader):
        def read_live(self, key: OutputKey, offset: int) -> LogSlice:
            raise OutputMissing("bucket unreachable")

    out = read_run_output(run(RunStatus.LEASED), 0, Down(), 30)  # type: ignore[arg-type]
    assert out.live and out.next_offset == 30 and "bucket unreachable" in out.missing_reason


# ---------------------------------------------------------------------------- the janitor sweeps what attempts left


def _janitor_run(attempt: int, log_uri: str) -> Run:
    r = run(RunStatus.SUCCEEDED, attempt=attempt, token=50)
    r.log_uri = log_uri
    return r


def _drain(janitor: OutputJanitor, count: int) -> None:
    deadline = time.monotonic() + 10
    while janitor.deleted < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert janitor.deleted == count


def test_the_janitor_sweeps_every_attempts_output_of_a_pruned_run(tmp_path: Path) -> None:
    root = tmp_path / "out"
    store = LocalOutputStore(str(root))
    left = OutputKey("J", "R", 1, 40)  # its executor died: its parts stayed
    store.put_part(left, 0, b"attempt 1 ")
    store.put_part(left, 10, b"was here", held=True)
    done = OutputKey("J", "R", 2, 50)
    uri = store.put(done, b"attempt 2", b"r")
    (root / "J" / "R" / "notes.txt").write_text("not ours")
    other = OutputKey("J", "R2", 1, 60)
    store.put_part(other, 0, b"another run")
    janitor = OutputJanitor(lambda: True, None, OutputLocation(local_dir=str(root)))
    janitor.on_applied([("pruned", _janitor_run(2, uri))])
    _drain(janitor, 1)
    assert sorted(os.listdir(root / "J" / "R")) == ["notes.txt"]
    assert os.listdir(root / "J" / "R2") == ["attempt-1-token-60.log.part-000000000000"]


def test_an_s3_sweep_costs_a_listing_only_when_an_attempt_may_have_left_parts() -> None:
    calls: list[tuple[str, object]] = []
    keys = [
        "raftsched/J/R/attempt-1-token-40.log.part-000000000000",
        "raftsched/J/R/attempt-2-token-50.log",
        "raftsched/J/R/attempt-2-token-50.result",
        "raftsched/J/R/README",
    ]

    class S3:
        def get_paginator(self, name: str) -> "S3":
            return self

        def paginate(self, **kw: object) -> list[dict]:
            calls.append(("list", kw["Prefix"]))
            return [{"Contents": [{"Key": k} for k in keys]}]

        def delete_objects(self, Bucket: str, Delete: dict) -> None:  # noqa: N803 - boto3's names
            calls.append(("delete", sorted(o["Key"] for o in Delete["Objects"])))

    janitor = OutputJanitor(lambda: True, lambda: S3(), OutputLocation(s3_bucket="b", s3_prefix="raftsched"))
    janitor.on_applied([("pruned", _janitor_run(1, "data:,"))])  # a quiet attempt: nothing at all
    janitor.on_applied([("pruned", _janitor_run(1, "s3://b/raftsched/J/R/attempt-1-token-50.log"))])
    _drain(janitor, 1)
    assert calls == [("delete", ["raftsched/J/R/attempt-1-token-50.log", "raftsched/J/R/attempt-1-token-50.result"])]
    calls.clear()
    janitor.on_applied([("pruned", _janitor_run(2, "s3://b/raftsched/J/R/attempt-2-token-50.log"))])  # a retried run
    _drain(janitor, 2)
    assert calls[-2:] == [("list", "raftsched/J/R/"), ("delete", sorted(keys[:3]))]
