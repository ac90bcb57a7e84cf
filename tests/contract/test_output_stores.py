"""The output-store contract (``raftsched.cluster.executor.ports.OutputStore``), one suite for every store: memory, local disk, S3.

Each test runs once per store (the ``case`` fixture, ``tests/contract/conftest.py``)
and makes the same assertions of each; a store that is known to miss a point
says so in its ``divergences`` and that test is expected to fail (strictly:
fixing the store turns it into an unexpected pass). The S3 store runs against
a moto server on loopback. Executor- and node-level behaviour around the
stores stays in ``tests/unit/test_executor_output.py`` and
``tests/integration/test_output_s3.py``.

Live output (``raftsched.cluster.domain.live_output``) is part of the contract: each
store takes a running attempt's parts beside where its log will be, the
node's reader finds them from the attempt's key alone and reads them from any
offset, and the executor removes them once the whole log is stored.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from raftsched.cluster.domain.live_output import LogSlice, part_name
from raftsched.cluster.executor.handlers import BoundedLog
from raftsched.cluster.executor.ports import TaskContext
from raftsched.cluster.executor.worker import _Held
from raftsched.storage import EMPTY_OUTPUT_URI, OutputKey, OutputMissing, OutputReader, OutputStoreError
from tests.contract.stores import MAX_READ_BYTES, FailingLogSource, MemoryCase, ReadRecorder, StoreCase
from tests.executor_fakes import TASK, TASK_KEY, executor, held

pytestmark = pytest.mark.contract

KEY = OutputKey("J1", "R1", 2, 42)
MIB = 1024 * 1024


def diverges(request: pytest.FixtureRequest, case: StoreCase, point: str) -> None:
    """Expect this test to fail for a store known to miss ``point`` of the contract."""
    if point in case.divergences:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{case.name}: {case.divergences[point]}"))


def base(case: StoreCase) -> str:
    """Where the store's URIs start: ``describe()`` without its endpoint, ending in a slash."""
    where = case.store.describe().split(" ")[0]
    return where if where.endswith("/") else where + "/"


def test_check_passes_on_a_fresh_store(case: StoreCase) -> None:
    case.store.check()
    assert case.is_empty() and not case.leftovers()


def test_check_reports_an_unusable_store_and_what_to_fix(case: StoreCase) -> None:
    variants = case.unusable()
    assert variants, f"{case.name}: the case names no unusable variant of its store"
    for v in variants:
        err = v.check()
        assert err is not None, f"{case.name}: check() passed on {v.what}"
        assert not err.retryable, f"{case.name}, {v.what}: retrying cannot help, yet retryable: {err}"
        assert v.names in str(err) and v.says in str(err), f"{case.name}, {v.what}: {err}"


def test_put_and_read_back_a_log_and_its_result(case: StoreCase) -> None:
    case.store.check()
    log, result = b"line 1\n" * 1000, b'{"exit_code": 0}'
    uri = case.store.put(KEY, log, result)
    rel = KEY.relpath()
    assert rel == "J1/R1/attempt-2-token-42"
    assert uri == case.store.uri_for(KEY) == base(case) + rel + ".log"
    assert case.reader.read(uri) == (log, result)
    assert case.objects() == {rel + ".log": log, rel + ".result": result}
    assert not case.leftovers()


def test_an_empty_result_reads_back_empty(case: StoreCase) -> None:
    uri = case.store.put(KEY, b"only a log", b"")
    assert case.reader.read(uri) == (b"only a log", b"")
    stored = case.objects()
    assert stored[KEY.relpath() + ".log"] == b"only a log"
    assert stored.get(KEY.relpath() + ".result", b"") == b""  # no result object, or an empty one


def test_the_same_key_again_overwrites(case: StoreCase) -> None:
    uri = case.store.put(KEY, b"first", b"r1")
    assert case.store.put(KEY, b"again", b"") == uri
    assert case.reader.read(uri) == (b"again", b"")


def test_the_fencing_token_and_the_attempt_are_part_of_the_key(case: StoreCase) -> None:
    keys = [OutputKey("J1", "R1", 1, 7), OutputKey("J1", "R1", 1, 8), OutputKey("J1", "R1", 2, 9)]
    uris = [case.store.put(k, f"log of token {k.fencing_token}".encode(), f"r{k.fencing_token}".encode()) for k in keys]
    assert len(set(uris)) == 3, uris
    for k, uri in zip(keys, uris):  # nobody overwrote anybody
        assert case.reader.read(uri) == (f"log of token {k.fencing_token}".encode(), f"r{k.fencing_token}".encode())
    assert sorted(n for n in case.objects() if n.endswith(".log")) == sorted(k.relpath() + ".log" for k in keys)
    assert case.store.put(keys[0], b"a zombie's late upload", b"") == uris[0]  # its own key: the live attempts are untouched
    assert case.reader.read(uris[1]) == (b"log of token 8", b"r8") and case.reader.read(uris[2]) == (b"log of token 9", b"r9")


def test_an_attempt_with_no_output_stores_nothing_and_reads_back_empty(case: StoreCase) -> None:
    case.store.check()
    before = case.requests()
    ex, api = executor(case.store)
    ex._finish(held(b""), True, b"", "")
    assert api.completions == [(True, b"", "", EMPTY_OUTPUT_URI)]
    assert case.is_empty(), case.objects()  # no file, no directory, no object ...
    assert case.requests() == before  # ... and no request
    assert case.reader.read(EMPTY_OUTPUT_URI) == (b"", b"")
    ex._finish(held(b""), True, b"r", "")  # a result alone is stored
    uri = api.completions[1][3]
    assert uri == case.store.uri_for(TASK_KEY) and case.reader.read(uri) == (b"", b"r")
    after = case.requests()
    assert after is None or before is not None and after > before, (before, after)  # the count above counts
    if isinstance(case, MemoryCase):
        assert case.memory.puts == 1


def test_a_large_log_streams_from_its_spool(case: StoreCase, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    diverges(request, case, "streams")
    big = BoundedLog(64 * MIB, spool_dir=str(tmp_path))
    for i in range(12):
        big.write(bytes([65 + i]) * MIB)
    source = ReadRecorder(big)
    uri = case.store.put(KEY, source, b"")
    assert len(source.reads) > 1 and all(0 < n <= MAX_READ_BYTES for n in source.reads), source.reads
    assert case.reader.read(uri) == (big.getvalue(), b"")
    assert case.parts(uri) == case.expected_parts(12 * MIB)  # S3: three 5 MiB parts
    assert not case.leftovers()
    big.close()


def test_the_reader_cuts_a_large_log_to_head_note_and_tail(case: StoreCase, request: pytest.FixtureRequest) -> None:
    diverges(request, case, "cuts")
    uri = case.store.put(KEY, b"a" * 6000 + b"b" * 6000, b"r")
    case.reader.max_bytes = 4000
    log, result = case.reader.read(uri)
    assert log.startswith(b"a" * 2000 + b"\n... [8000 bytes") and log.endswith(b"b" * 2000)
    assert uri in log.decode() and result == b"r"
    data = b"".join(bytes([65 + i]) * MIB for i in range(12))
    uri = case.store.put(KEY, data, b"")
    case.reader.max_bytes = 4 * MIB
    log, result = case.reader.read(uri)
    assert result == b"" and log.startswith(b"A" * MIB) and log.endswith(b"L" * MIB)
    assert b"[8388608 bytes of a 12582912-byte log left out here" in log
    case.reader.max_bytes = 0
    assert case.reader.read(uri)[0] == data


def test_a_missing_log_is_output_missing_with_the_reason(case: StoreCase) -> None:
    uri = case.store.put(KEY, b"log", b"res")
    case.remove(KEY.relpath() + ".log")  # a lifecycle rule, a wiped disk
    with pytest.raises(OutputMissing) as err:
        case.reader.read(uri)
    assert case.missing_says in str(err.value) and KEY.relpath() in str(err.value), str(err.value)


def test_a_failed_put_is_a_store_error_and_leaves_no_readable_log(case: StoreCase, request: pytest.FixtureRequest) -> None:
    diverges(request, case, "put_error")
    with pytest.raises(OutputStoreError) as err:
        case.store.put(KEY, FailingLogSource(), b"")  # type: ignore[arg-type]
    assert "disk went away" in str(err.value)
    with pytest.raises(OutputMissing):
        case.reader.read(case.store.uri_for(KEY))


def test_a_failed_put_leaves_no_partial_upload_behind(case: StoreCase, request: pytest.FixtureRequest) -> None:
    diverges(request, case, "leftovers")
    with pytest.raises((OutputStoreError, OSError)):
        case.store.put(KEY, FailingLogSource(), b"")  # type: ignore[arg-type]
    assert case.leftovers() == []


def test_unusual_ids_stay_inside_the_store(case: StoreCase) -> None:
    uri = case.store.put(OutputKey("../../etc", "a/b", 1, 1), b"x", b"")
    assert uri.startswith(base(case)) and "/../" not in uri
    assert case.reader.read(uri) == (b"x", b"")
    assert all(".." not in name.split("/") for name in case.objects()), case.objects()


# ---------------------------------------------------------------------------- live parts

LIVE = KEY.relpath() + ".log"


def test_live_parts_lie_beside_the_log_and_read_back_from_any_offset(case: StoreCase) -> None:
    case.store.check()
    case.store.put_part(KEY, 0, b"line 1\n")  # type: ignore[attr-defined]
    case.store.put_part(KEY, 7, b"line 2\n")  # type: ignore[attr-defined]
    assert sorted(case.objects()) == [part_name(LIVE, 0), part_name(LIVE, 7)]
    assert case.reader.read_live(KEY, 0) == LogSlice(b"line 1\nline 2\n", 14, 14)
    assert case.reader.read_live(KEY, 7) == LogSlice(b"line 2\n", 14, 14)
    assert case.reader.read_live(KEY, 3) == LogSlice(b"e 1\nline 2\n", 14, 14)  # inside a part
    assert case.reader.read_live(KEY, 14) == LogSlice(b"", 14, 14)
    case.store.put_part(KEY, 14, b"line 3\n")  # type: ignore[attr-defined]
    assert case.reader.read_live(KEY, 14) == LogSlice(b"line 3\n", 21, 21)  # (S3: only the parts from 14 are listed)
    assert case.reader.read_live(OutputKey("J1", "R1", 2, 43), 0) == LogSlice(b"", 0, 0)  # another token: another attempt
    assert not case.leftovers()


def test_no_live_parts_yet_reads_as_an_empty_live_log(case: StoreCase) -> None:
    assert case.reader.read_live(KEY, 0) == LogSlice(b"", 0, 0)
    assert case.reader.read_live(KEY, 10) == LogSlice(b"", 0, 10)  # a follower keeps its place
    assert case.is_empty()


def test_a_gap_ends_the_live_log_until_it_is_filled(case: StoreCase) -> None:
    case.store.put_part(KEY, 0, b"aaaa")  # type: ignore[attr-defined]
    case.store.put_part(KEY, 8, b"cccc")  # type: ignore[attr-defined]
    assert case.reader.read_live(KEY, 0) == LogSlice(b"aaaa", 4, 4)
    case.store.put_part(KEY, 4, b"bbbb")  # type: ignore[attr-defined]
    assert case.reader.read_live(KEY, 4) == LogSlice(b"bbbbcccc", 12, 12)


def test_a_part_shipped_again_replaces_itself(case: StoreCase) -> None:
    case.store.put_part(KEY, 0, b"ab")  # type: ignore[attr-defined]
    case.store.put_part(KEY, 0, b"abcd")  # type: ignore[attr-defined]  # a retry after a put that had landed
    assert case.reader.read_live(KEY, 0) == LogSlice(b"abcd", 4, 4)
    assert list(case.objects()) == [part_name(LIVE, 0)]


def test_the_held_note_is_told_where_the_live_log_stops(case: StoreCase) -> None:
    case.store.put_part(KEY, 0, b"head")  # type: ignore[attr-defined]
    case.store.put_part(KEY, 4, "the rest comes at the end".encode(), held=True)  # type: ignore[attr-defined]
    assert case.reader.read_live(KEY, 0) == LogSlice(b"head", 4, 4, "the rest comes at the end")
    assert case.reader.read_live(KEY, 4).note == "the rest comes at the end"
    assert sorted(case.objects()) == [part_name(LIVE, 0), part_name(LIVE, 4, held=True)]


def test_once_the_whole_log_is_stored_the_parts_go_and_the_offset_holds(case: StoreCase) -> None:
    case.store.put_part(KEY, 0, b"line 1\n")  # type: ignore[attr-defined]
    case.store.put_part(KEY, 7, b"line 2\n")  # type: ignore[attr-defined]
    case.store.put_part(KEY, 14, b"note", held=True)  # type: ignore[attr-defined]
    uri = case.store.put(KEY, b"line 1\nline 2\nline 3\n", b"r")
    case.store.delete_parts(KEY, [(0, False), (7, False), (14, True), (99, False)])  # type: ignore[attr-defined]
    assert sorted(case.objects()) == [KEY.relpath() + ".log", KEY.relpath() + ".result"]
    assert case.reader.read_at(uri, 14) == (LogSlice(b"line 3\n", 21, 21), b"r")  # the follower goes on from there
    assert case.reader.read_live(KEY, 14) == LogSlice(b"", 0, 14)


def test_a_stored_log_reads_from_an_offset_in_windows(case: StoreCase) -> None:
    data = b"0123456789" * 3
    uri = case.store.put(KEY, data, b"r")
    case.reader.max_bytes = 12
    whole, result = case.reader.read_at(uri, 0)  # from the start, over the limit: head + note + tail
    assert whole.data.startswith(b"012345\n... [18 bytes of a 30-byte log") and whole.data.endswith(b"456789")
    assert (whole.size, whole.next_offset, result) == (30, 30, b"r")
    got, offset = b"", 5
    while offset < 30:
        piece, _ = case.reader.read_at(uri, offset)
        assert len(piece.data) <= 12 and piece.size == 30
        got, offset = got + piece.data, piece.next_offset
    assert got == data[5:]
    assert case.reader.read_at(uri, 30)[0] == LogSlice(b"", 30, 30)


def test_an_executor_ships_live_output_and_then_stores_the_whole_log(case: StoreCase) -> None:
    case.store.check()
    ex, api = executor(case.store)
    assert ex._live is not None
    ctx = TaskContext()
    ex._live.watch(TASK, ctx.log)
    quiet = case.requests()
    for _ in range(3):
        ex._live.tick()
    assert case.requests() == quiet and case.is_empty()  # nothing written: nothing shipped
    ctx.log.write(b"first line\n")
    assert ex._live.tick() == 11
    assert case.reader.read_live(TASK_KEY, 0).data == b"first line\n"
    ctx.log.write(b"last line\n")
    ex._finish(_Held(TASK, ctx, 30.0), True, b"done", "")
    uri = api.completions[0][3]
    assert case.reader.read_at(uri, 11)[0].data == b"last line\n"
    assert sorted(case.objects()) == [TASK_KEY.relpath() + ".log", TASK_KEY.relpath() + ".result"]  # no parts left


# ---------------------------------------------------------------------------- the reader, whatever the store


@pytest.mark.parametrize(
    "uri,needle",
    [
        ("file:///etc/passwd", "not a raftsched run log"),
        ("file://relative/attempt-1-token-1.log", "not a raftsched run log"),
        ("file:///x/../etc/attempt-1-token-1.log", "not a raftsched run log"),
        ("file:///nonexistent/J/R/attempt-1-token-1.log", "cannot be read on this node"),
        ("http://example.com/attempt-1-token-1.log", "scheme this node cannot read"),
        ("s3://bucket/attempt-1-token-1.log", "no S3 reader"),
        ("mem://J/R/attempt-1-token-1.log", "scheme this node cannot read"),
    ],
)
def test_the_reader_reports_unreadable_uris_with_a_reason(uri: str, needle: str) -> None:
    with pytest.raises(OutputMissing) as err:
        OutputReader().read(uri)
    assert needle in str(err.value)
