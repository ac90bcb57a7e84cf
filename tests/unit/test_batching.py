"""Tests for raftsched.raft.batching: the batch entry format and the group committer.

The committer is driven by a fake ``propose_async`` that records every
proposal with its callback and answers only when the test says so (from a
thread of its own when it matters, as pysyncobj's tick thread would). Callers
run ``submit`` in threads; everything waits on events with short timeouts.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import Every, JobSpec
from raftsched.raft.batching import MAGIC, BatchFormatError, Callback, GroupCommitter, Timeout, is_batch, pack, unpack

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
WAIT = 2.0  # the longest any step may take before the test gives up (never reached when all is well)

command_lists = st.lists(st.binary(max_size=300), max_size=20)


# ------------------------------------------------------------------ entry format


@settings(max_examples=200, deadline=None)
@given(command_lists)
def test_pack_unpack_round_trip(commands: list[bytes]) -> None:
    data = pack(commands)
    assert is_batch(data)
    assert data.startswith(MAGIC)
    assert unpack(data) == commands


def test_commands_that_look_like_batches_survive() -> None:
    tricky = [b"", MAGIC, pack([b"inner"]), b"\x00" * 9, b"{}"]
    assert unpack(pack(tricky)) == tricky
    assert unpack(pack([])) == []


@settings(max_examples=50, deadline=None)
@given(command_lists)
def test_every_truncation_is_refused(commands: list[bytes]) -> None:
    data = pack(commands)
    for cut in range(len(data)):
        with pytest.raises(BatchFormatError):
            unpack(data[:cut])


@settings(max_examples=100, deadline=None)
@given(command_lists, st.binary(min_size=1, max_size=20))
def test_stray_trailing_bytes_are_refused(commands: list[bytes], extra: bytes) -> None:
    with pytest.raises(BatchFormatError):
        unpack(pack(commands) + extra)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
def test_unpack_of_arbitrary_bytes_only_ever_raises_batch_format_error(tail: bytes) -> None:
    data = MAGIC + tail
    try:
        commands = unpack(data)
    except BatchFormatError:
        return
    assert pack(commands) == data  # what parses is exactly a packed batch


JSON_COMMANDS = [
    c.encode(c.CreateJob(T0, "j1", JobSpec("n", Every(1_000), payload=b"\x00\xff"))),
    c.encode(c.TriggerJob(T0, "j1")),
    c.encode(c.AcquireLeases(T0, "ex-1", ("default",), 10)),
    c.encode(c.Barrier(T0)),
    b'{"v": 1, "op": "barrier", "now": 0}',
    b"{}",
]


@pytest.mark.parametrize("data", JSON_COMMANDS)
def test_json_commands_are_not_batches(data: bytes) -> None:
    assert data.startswith(b"{")
    assert not is_batch(data)
    with pytest.raises(BatchFormatError):
        unpack(data)


# ------------------------------------------------------------------ the committer's harness


class FakeRaft:
    """``propose_async`` that records (data, callback) and answers when told to."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, Callback]] = []
        self.fail_next = False
        self._cond = threading.Condition()

    def propose_async(self, data: bytes, callback: Callback) -> None:
        with self._cond:
            if self.fail_next:
                self.fail_next = False
                raise RuntimeError("not the leader and no leader known")
            self.sent.append((data, callback))
            self._cond.notify_all()

    def wait_sent(self, count: int, timeout: float = WAIT) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.sent) >= count, timeout), f"{len(self.sent)} sent, expected {count}"

    def data(self, n: int) -> bytes:
        return self.sent[n][0]

    def answer(self, n: int, result: Any, error: int = 0) -> None:
        """Answer proposal ``n`` from another thread, as pysyncobj's tick thread does; return once it ran."""
        thread = threading.Thread(target=self.sent[n][1], args=(result, error))
        thread.start()
        thread.join(WAIT)
        assert not thread.is_alive()


def commands_of(data: bytes) -> list[bytes]:
    return unpack(data) if is_batch(data) else [data]


def echo(data: bytes) -> Any:
    """What an adapter would answer: one result per command (a list for a batch)."""
    if is_batch(data):
        return [b"r:" + cmd for cmd in unpack(data)]
    return b"r:" + data


class Caller(threading.Thread):
    """One ``submit`` in a thread of its own."""

    def __init__(self, gc: GroupCommitter, data: bytes, timeout: float = WAIT, weight: int = 0) -> None:
        super().__init__(daemon=True)
        self.gc, self.payload, self.timeout, self.weight = gc, data, timeout, weight
        self.outcome: tuple[Any, int] | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.outcome = self.gc.submit(self.payload, self.timeout, self.weight)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc
        finally:
            self.done.set()

    def result(self) -> tuple[Any, int]:
        assert self.done.wait(WAIT), f"submit of {self.payload!r} did not return"
        assert self.error is None, repr(self.error)
        assert self.outcome is not None
        return self.outcome


def wait_until(cond: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.002)


def queued(gc: GroupCommitter) -> int:
    with gc._lock:
        return len(gc._queue)


def start_queued(gc: GroupCommitter, items: list[tuple[bytes, int]], timeout: float = WAIT) -> list[Caller]:
    """Start one caller per (data, weight), each only once the previous one is queued: the queue keeps their order."""
    callers: list[Caller] = []
    base = queued(gc)
    for data, weight in items:
        caller = Caller(gc, data, timeout, weight)
        caller.start()
        callers.append(caller)
        wait_until(lambda: queued(gc) == base + len(callers))
    return callers


def block(gc: GroupCommitter, fake: FakeRaft, data: bytes = b"blocker") -> Caller:
    """Occupy the only in-flight slot with a lone proposal that stays unanswered until the test answers it."""
    before = len(fake.sent)
    caller = Caller(gc, data)
    caller.start()
    fake.wait_sent(before + 1)
    return caller


# ------------------------------------------------------------------ the committer


def test_a_lone_command_is_sent_unwrapped_and_gets_its_result() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    caller = Caller(gc, b'{"op": "barrier"}')
    caller.start()
    fake.wait_sent(1)
    assert fake.data(0) == b'{"op": "barrier"}'  # not wrapped in a batch
    assert not caller.done.is_set()  # waits for the answer
    fake.answer(0, ["a", "list", "stays", "whole"])  # a lone command's result is not split
    assert caller.result() == (["a", "list", "stays", "whole"], 0)
    assert (gc.entries, gc.commands) == (1, 1)
    assert len(fake.sent) == 1


def test_a_lone_submit_from_the_calling_thread() -> None:
    fake = FakeRaft()

    def propose_and_answer(data: bytes, callback: Callback) -> None:
        fake.propose_async(data, callback)
        threading.Thread(target=callback, args=(echo(data), 0)).start()

    gc = GroupCommitter(propose_and_answer)
    assert gc.submit(b"x", WAIT) == (b"r:x", 0)
    assert [data for data, _ in fake.sent] == [b"x"]


def test_what_queues_behind_a_full_window_goes_as_one_batch() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    first = block(gc, fake, b"a")
    callers = start_queued(gc, [(b"b", 0), (b"c", 0), (b"d", 0)])
    time.sleep(0.05)
    assert len(fake.sent) == 1  # nothing else leaves while the window is full
    fake.answer(0, echo(fake.data(0)))
    assert first.result() == (b"r:a", 0)
    fake.wait_sent(2)
    assert fake.data(1) == pack([b"b", b"c", b"d"])  # ONE entry, in submission order
    assert not any(caller.done.is_set() for caller in callers)
    fake.answer(1, [b"rb", b"rc", b"rd"])
    assert [caller.result() for caller in callers] == [(b"rb", 0), (b"rc", 0), (b"rd", 0)]
    assert (gc.entries, gc.commands) == (2, 4)
    assert len(fake.sent) == 2


def test_two_slots_let_two_proposals_fly_before_batching() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=2)
    a = block(gc, fake, b"a")
    b = block(gc, fake, b"b")
    assert [fake.data(0), fake.data(1)] == [b"a", b"b"]
    callers = start_queued(gc, [(b"c", 0), (b"d", 0)])
    fake.answer(1, echo(fake.data(1)))  # the second answers first: its slot frees
    assert b.result() == (b"r:b", 0)
    fake.wait_sent(3)
    assert fake.data(2) == pack([b"c", b"d"])
    fake.answer(2, echo(fake.data(2)))
    assert [caller.result() for caller in callers] == [(b"r:c", 0), (b"r:d", 0)]
    assert not a.done.is_set()
    fake.answer(0, echo(fake.data(0)))
    assert a.result() == (b"r:a", 0)


def drain(gc: GroupCommitter, fake: FakeRaft, items: list[tuple[bytes, int]]) -> list[list[bytes]]:
    """Queue ``items`` behind a blocker, then answer one entry at a time: the commands of each entry sent after it."""
    blocker = block(gc, fake)
    callers = start_queued(gc, items)
    fake.answer(0, echo(fake.data(0)))
    assert blocker.result() == (b"r:blocker", 0)
    n, proposed = 1, 0
    while proposed < len(items):
        fake.wait_sent(n + 1)
        proposed += len(commands_of(fake.data(n)))
        fake.answer(n, echo(fake.data(n)))
        n += 1
    for caller in callers:
        assert caller.result() == (b"r:" + caller.payload, 0)
    time.sleep(0.02)
    assert len(fake.sent) == n  # nothing sent twice, nothing extra
    return [commands_of(data) for data, _ in fake.sent[1:]]


def test_max_commands_splits_batches() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1, max_commands=2)
    items = [(bytes([65 + i]), 0) for i in range(5)]
    assert drain(gc, fake, items) == [[b"A", b"B"], [b"C", b"D"], [b"E"]]
    assert fake.data(3) == b"E"  # the lone tail goes unwrapped


def test_max_bytes_splits_batches_but_an_oversized_command_still_goes() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1, max_bytes=10)
    big = b"B" * 25
    items = [(big, 0), (b"xxxx", 0), (b"yyyy", 0), (b"zzzz", 0), (b"w" * 10, 0)]
    assert drain(gc, fake, items) == [[big], [b"xxxx", b"yyyy"], [b"zzzz"], [b"w" * 10]]
    assert fake.data(1) == big


def test_max_bytes_counts_the_whole_batch_exactly() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1, max_bytes=10)
    items = [(b"12345", 0), (b"67890", 0), (b"x", 0)]  # 5 + 5 == 10 fits, one more byte does not
    assert drain(gc, fake, items) == [[b"12345", b"67890"], [b"x"]]


def test_max_weight_splits_batches_but_an_overweight_command_still_goes() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1, max_weight=10)
    items = [(b"heavy", 15), (b"a", 4), (b"b", 6), (b"c", 1), (b"d", 0), (b"e", 9), (b"f", 2)]
    assert drain(gc, fake, items) == [[b"heavy"], [b"a", b"b"], [b"c", b"d", b"e"], [b"f"]]


def test_a_fail_reason_reaches_every_caller_of_the_batch() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    block(gc, fake)
    callers = start_queued(gc, [(b"a", 0), (b"b", 0), (b"c", 0)])
    fake.answer(0, None)
    fake.wait_sent(2)
    fake.answer(1, None, 3)
    assert [caller.result() for caller in callers] == [(None, 3)] * 3


def test_a_fail_reason_reaches_a_lone_caller() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    caller = block(gc, fake, b"only")
    fake.answer(0, None, 3)
    assert caller.result() == (None, 3)


@pytest.mark.parametrize("result", ["not a list", [b"r1", b"r2"], [b"r1", b"r2", b"r3", b"r4"], None, (b"1", b"2", b"3")])
def test_a_result_that_does_not_fit_the_batch_goes_to_every_caller(result: Any) -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    block(gc, fake)
    callers = start_queued(gc, [(b"a", 0), (b"b", 0), (b"c", 0)])
    fake.answer(0, None)
    fake.wait_sent(2)
    assert fake.data(1) == pack([b"a", b"b", b"c"])
    fake.answer(1, result)
    assert [caller.result() for caller in callers] == [(result, 0)] * 3


def test_timeout_before_leaving_the_node_says_not_proposed_and_the_item_never_leaves() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    blocker = block(gc, fake)
    started = time.monotonic()
    with pytest.raises(Timeout) as info:
        gc.submit(b"late", 0.2)
    assert info.value.proposed is False
    assert 0.15 < time.monotonic() - started < 1.0
    assert queued(gc) == 0  # removed from the queue
    fake.answer(0, echo(fake.data(0)))  # the window frees: the timed-out item must not go now
    assert blocker.result() == (b"r:blocker", 0)
    time.sleep(0.05)
    assert [data for data, _ in fake.sent] == [b"blocker"]
    assert (gc.entries, gc.commands) == (1, 1)
    assert_still_commits(gc, fake, 1, b"next")


def assert_still_commits(gc: GroupCommitter, fake: FakeRaft, index: int, data: bytes, **caller_kw: float) -> None:
    """After a failure, the committer still sends a new proposal (as entry ``index``) and answers it."""
    caller = Caller(gc, data, **caller_kw)
    caller.start()
    fake.wait_sent(index + 1)
    assert fake.data(index) == data
    fake.answer(index, echo(fake.data(index)))
    assert caller.result() == (b"r:" + data, 0)


def test_only_the_timed_out_item_leaves_the_queue() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    block(gc, fake)
    keep = start_queued(gc, [(b"keep-1", 0)])
    with pytest.raises(Timeout) as info:
        gc.submit(b"late", 0.1)
    assert info.value.proposed is False
    keep += start_queued(gc, [(b"keep-2", 0)])
    fake.answer(0, None)
    fake.wait_sent(2)
    assert fake.data(1) == pack([b"keep-1", b"keep-2"])
    fake.answer(1, echo(fake.data(1)))
    assert [caller.result() for caller in keep] == [(b"r:keep-1", 0), (b"r:keep-2", 0)]


def test_timeout_after_sending_says_proposed() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    with pytest.raises(Timeout) as info:
        gc.submit(b"lost", 0.2)
    assert info.value.proposed is True
    assert [data for data, _ in fake.sent] == [b"lost"]


def test_timeout_after_sending_a_batch_says_proposed_to_each_caller() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    block(gc, fake)
    callers = start_queued(gc, [(b"a", 0), (b"b", 0)], timeout=0.3)
    fake.answer(0, None)
    fake.wait_sent(2)
    for caller in callers:
        assert caller.done.wait(WAIT)
        assert isinstance(caller.error, Timeout) and caller.error.proposed is True


def test_a_stale_batch_stops_blocking_the_queue() -> None:
    clock = [100.0]
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1, stale_s=1.0, monotonic=lambda: clock[0])
    lost = block(gc, fake, b"lost")  # its answer never comes (a forward lost with the leader)
    waiting = start_queued(gc, [(b"w", 0)], timeout=1_000.0)
    time.sleep(0.3)  # a retry pass of the waiting caller runs: the batch is not stale yet
    assert len(fake.sent) == 1
    clock[0] += 1.5
    fake.wait_sent(2)  # the waiting caller's next pass finds the batch stale and sends
    assert fake.data(1) == b"w"
    fake.answer(1, echo(fake.data(1)))
    assert waiting[0].result() == (b"r:w", 0)
    fake.answer(0, echo(fake.data(0)))  # a late answer still reaches its caller
    assert lost.result() == (b"r:lost", 0)


def test_a_new_submit_also_sends_past_a_stale_batch() -> None:
    clock = [0.0]
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1, stale_s=1.0, monotonic=lambda: clock[0])
    lost = block(gc, fake, b"lost")
    clock[0] = 5.0
    assert_still_commits(gc, fake, 1, b"fresh", timeout=1_000.0)
    # the clock passed the lost caller's deadline too: it times out, and it was sent
    assert lost.done.wait(WAIT)
    assert isinstance(lost.error, Timeout) and lost.error.proposed is True


def test_propose_async_raising_fails_the_lone_caller_and_frees_the_slot() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    fake.fail_next = True
    assert gc.submit(b"x", WAIT) == (None, -1)
    assert fake.sent == []
    caller = block(gc, fake, b"y")  # the slot is free again
    assert fake.data(0) == b"y"
    fake.answer(0, echo(fake.data(0)))
    assert caller.result() == (b"r:y", 0)


def test_propose_async_raising_fails_every_caller_of_the_batch_and_frees_the_slot() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    block(gc, fake)
    callers = start_queued(gc, [(b"a", 0), (b"b", 0), (b"c", 0)])
    fake.fail_next = True
    fake.answer(0, None)  # the slot frees, the batch is proposed from the callback and the proposal raises
    assert [caller.result() for caller in callers] == [(None, -1)] * 3
    assert len(fake.sent) == 1
    assert_still_commits(gc, fake, 1, b"after")


def test_many_concurrent_callers_each_get_their_own_result() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=2, max_commands=7)
    stop = threading.Event()

    def tick() -> None:  # answers whatever was sent, in order, like a leader applying entries
        answered = 0
        while not stop.is_set():
            if answered < len(fake.sent):
                data, callback = fake.sent[answered]
                callback(echo(data), 0)
                answered += 1
            else:
                time.sleep(0.001)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    callers = [Caller(gc, f"cmd-{i}".encode()) for i in range(60)]
    for caller in callers:
        caller.start()
    try:
        for caller in callers:
            assert caller.result() == (b"r:" + caller.payload, 0)
    finally:
        stop.set()
        ticker.join(WAIT)
    sent = [cmd for data, _ in fake.sent for cmd in commands_of(data)]
    assert sorted(sent) == sorted(caller.payload for caller in callers)  # each exactly once
    assert all(len(commands_of(data)) <= 7 for data, _ in fake.sent)
    assert gc.commands == 60 and gc.entries == len(fake.sent)


class ManyCaller(threading.Thread):
    """One ``submit_many`` in a thread of its own."""

    def __init__(self, gc: GroupCommitter, proposals: list[tuple[bytes, int]], timeout: float = WAIT) -> None:
        super().__init__(daemon=True)
        self.gc, self.proposals, self.timeout = gc, proposals, timeout
        self.answers: list[Any] | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.answers = self.gc.submit_many(self.proposals, self.timeout)
        finally:
            self.done.set()


def test_one_call_split_over_entries_returns_once_every_entry_answered_each_answer_in_place() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1, max_commands=2)
    caller = ManyCaller(gc, [(bytes([65 + i]), 0) for i in range(5)])
    caller.start()
    for n in range(2):
        fake.wait_sent(n + 1)
        fake.answer(n, echo(fake.data(n)))
        assert not caller.done.wait(0.05), f"returned after entry {n} of 3"
    fake.wait_sent(3)
    fake.answer(2, echo(fake.data(2)))
    assert caller.done.wait(WAIT)
    assert caller.answers == [(b"r:" + bytes([65 + i]), 0) for i in range(5)]


def test_one_call_that_times_out_part_way_keeps_the_answers_it_got_and_leaves_the_queue() -> None:
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1, max_commands=2)
    caller = ManyCaller(gc, [(b"a", 0), (b"b", 0), (b"c", 0), (b"d", 0), (b"e", 0)], timeout=0.4)
    caller.start()
    fake.wait_sent(1)
    fake.answer(0, echo(fake.data(0)))
    fake.wait_sent(2)  # (c, d) left the node and stay unanswered; e waits behind them
    assert caller.done.wait(WAIT)
    answers = caller.answers
    assert answers is not None and answers[:2] == [(b"r:a", 0), (b"r:b", 0)]
    assert [(type(a), a.proposed) for a in answers[2:]] == [(Timeout, True), (Timeout, True), (Timeout, False)]
    assert queued(gc) == 0
    fake.answer(1, echo(fake.data(1)))  # a late answer changes nothing and sends nothing more
    time.sleep(0.05)
    assert len(fake.sent) == 2 and answers[2].proposed is True
    assert_still_commits(gc, fake, 2, b"next")


def test_a_call_is_woken_once_whatever_the_number_of_its_proposals(monkeypatch: pytest.MonkeyPatch) -> None:
    sets: list[int] = []  # the events the committer sets
    real_set = threading.Event.set

    def counted(event: threading.Event) -> None:
        if sys._getframe(1).f_globals["__name__"] == "raftsched.raft.batching":
            sets.append(id(event))
        real_set(event)

    monkeypatch.setattr(threading.Event, "set", counted)
    fake = FakeRaft()
    gc = GroupCommitter(fake.propose_async, max_inflight=1)
    caller = ManyCaller(gc, [(f"c{i}".encode(), 0) for i in range(30)])
    caller.start()
    fake.wait_sent(1)
    before = len(sets)
    fake.answer(0, echo(fake.data(0)))
    assert caller.done.wait(WAIT)
    assert caller.answers == [(f"r:c{i}".encode(), 0) for i in range(30)]
    assert len(sets) - before == 1, f"the answer set {len(sets) - before} events for one call of 30"
