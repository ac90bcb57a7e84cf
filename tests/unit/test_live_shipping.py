"""Shipping live output (``raftsched.cluster.executor.live_log``): the cadence and the bounds, with a fake store and a
fake clock, and the executor around it — above all, that an attempt with no output makes no store call."""

from __future__ import annotations

import threading

import pytest

from raftsched.cluster.domain.live_output import part_name
from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.cluster.executor.bounded_log import BoundedLog
from raftsched.cluster.executor.live_log import LiveSettings, LiveShipper
from raftsched.cluster.executor.ports import Task, TaskContext
from raftsched.cluster.executor.worker import Executor, _Held
from raftsched.storage import EMPTY_OUTPUT_URI, MemoryOutputStore, OutputReader
from tests.executor_fakes import TASK, TASK_KEY, FakeApi

pytestmark = pytest.mark.unit

RUN = Task("L7", 7, "R", "J", 1, "shell", b"", 0, 0, 0)
KEY = OutputKey("J", "R", 1, 7)  # where RUN's output goes
TICK = 0.2


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Store(MemoryOutputStore):
    """A memory store that records every part call with the fake time it came at."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.calls: list[tuple[float, int, int, bool]] = []  # (time, offset, size, held)

    def put_part(self, key: OutputKey, offset: int, data: bytes, held: bool = False) -> None:
        self.calls.append((self.clock.now, offset, len(data), held))
        super().put_part(key, offset, data, held)


def shipper(settings: LiveSettings = LiveSettings()) -> tuple[LiveShipper, Store, Clock]:
    clock = Clock()
    store = Store(clock)
    return LiveShipper(store, settings, clock), store, clock


def run_for(ship: LiveShipper, clock: Clock, seconds: float, each_tick=None) -> None:  # type: ignore[no-untyped-def]
    for _ in range(round(seconds / TICK)):
        if each_tick is not None:
            each_tick()
        clock.now += TICK
        ship.tick()


def live_bytes(store: MemoryOutputStore, key: OutputKey = KEY) -> bytes:
    reader = OutputReader(memory=store, location=OutputLocation(memory=True))
    return reader.read_live(key, 0).data


def test_a_quiet_run_costs_no_store_call() -> None:
    ship, store, clock = shipper()
    log = BoundedLog(4096)
    ship.watch(RUN, log)
    run_for(ship, clock, 10)
    assert ship._lives == {}  # no shipping state either: watching a run is one dict entry
    assert ship.finish(RUN) == [] and store.calls == [] and store.part_calls == 0 and store.objects == {}


def test_at_most_one_ship_per_second_and_only_when_there_is_new_output() -> None:
    ship, store, clock = shipper()
    log = BoundedLog(1024 * 1024)
    ship.watch(RUN, log)
    written = bytearray()

    def chatty() -> None:  # a line every tick: five a second
        line = f"line {len(written)}\n".encode()
        log.write(line)
        written.extend(line)

    run_for(ship, clock, 6, chatty)
    times = [t for t, *_ in store.calls]
    assert 5 <= len(times) <= 7, times  # one per second, not one per tick
    assert all(b - a >= 1.0 - 1e-9 for a, b in zip(times, times[1:])), times
    assert times[0] - 1000.0 <= TICK + 1e-9  # the first line goes out at the next tick
    run_for(ship, clock, 1.2)  # one more ship takes what the last second wrote
    assert live_bytes(store) == bytes(written)
    calls = len(store.calls)
    run_for(ship, clock, 5)  # nothing new: nothing shipped
    assert len(store.calls) == calls
    offsets = [o for _, o, _, _ in store.calls]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert ship.finish(RUN) == [(o, False) for o in offsets]


def test_only_the_head_is_shipped_then_one_held_note() -> None:
    ship, store, clock = shipper(LiveSettings(part_bytes=300))
    log = BoundedLog(2048)  # head: the first 1024 bytes
    ship.watch(RUN, log)
    data = bytes(range(256)) * 40  # 10 KiB, far over the limit
    log.write(data[:500])
    run_for(ship, clock, 1)
    log.write(data[500:])
    run_for(ship, clock, 5)
    sizes = [(o, n, h) for _, o, n, h in store.calls]
    assert sizes[:2] == [(0, 300, False), (300, 200, False)]  # parts of at most part_bytes
    assert sum(n for _, n, h in sizes if not h) == 1024  # the head, and never more
    assert sizes[-1][0] == 1024 and sizes[-1][2] is True and len([s for s in sizes if s[2]]) == 1
    assert live_bytes(store) == data[:1024]
    note = store.objects[part_name(KEY.relpath() + ".log", 1024, held=True)].decode()
    assert "first 1024 bytes" in note and "2048-byte log limit" in note and "attempt 1 ends" in note
    calls = len(store.calls)
    log.write(b"more")
    run_for(ship, clock, 3)
    assert len(store.calls) == calls  # nothing more until the end
    assert log.getvalue().startswith(live_bytes(store))  # the live bytes begin the log stored at the end


def test_a_failing_store_is_retried_with_backoff_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    ship, store, clock = shipper(LiveSettings(max_backoff_s=8.0))
    store.part_failures = 4
    log = BoundedLog(4096)
    ship.watch(RUN, log)
    log.write(b"hello\n")
    run_for(ship, clock, 40)
    times = [t for t, *_ in store.calls]
    gaps = [round(b - a, 1) for a, b in zip(times, times[1:])]
    assert gaps == [2.0, 4.0, 8.0, 8.0], gaps  # doubling, capped
    assert live_bytes(store) == b"hello\n"
    assert len([r for r in caplog.records if "live log not shipped" in r.message]) == 1  # logged once per run


def test_nothing_is_shipped_after_finish() -> None:
    ship, store, clock = shipper()
    log = BoundedLog(4096)
    ship.watch(RUN, log)
    log.write(b"a\n")
    run_for(ship, clock, 1)
    assert ship.finish(RUN) == [(0, False)]
    log.write(b"b\n")
    run_for(ship, clock, 3)
    assert [o for _, o, _, _ in store.calls] == [0]


def test_finish_waits_for_a_part_on_its_way() -> None:
    entered, release = threading.Event(), threading.Event()

    class Slow(MemoryOutputStore):
        def put_part(self, key: OutputKey, offset: int, data: bytes, held: bool = False) -> None:
            entered.set()
            release.wait(5)
            super().put_part(key, offset, data, held)

    store = Slow()
    ship = LiveShipper(store, LiveSettings())
    log = BoundedLog(4096)
    ship.watch(RUN, log)
    log.write(b"x\n")
    t = threading.Thread(target=ship.tick)
    t.start()
    assert entered.wait(5)
    threading.Timer(0.3, release.set).start()
    assert ship.finish(RUN) == [(0, False)]
    assert part_name(KEY.relpath() + ".log", 0) in store.objects  # landed before finish returned
    t.join(5)


# ---------------------------------------------------------------------------- the executor around it


def executor_with(store: MemoryOutputStore) -> tuple[Executor, FakeApi]:
    api = FakeApi()
    return Executor(api, ["q"], output=store, output_retry_s=1.0), api  # type: ignore[arg-type]


def held(ex: Executor, text: bytes) -> _Held:
    ctx = TaskContext()
    h = _Held(TASK, ctx, 30.0)
    assert ex._live is not None
    ex._live.watch(TASK, ctx.log)
    ctx.log.write(text)
    return h


def test_an_attempt_with_no_output_makes_no_store_call() -> None:
    store = MemoryOutputStore()
    ex, api = executor_with(store)
    h = held(ex, b"")
    for _ in range(10):
        assert ex._live is not None and ex._live.tick() == 0
    ex._finish(h, True, b"", "")
    assert api.completions == [(True, b"", "", EMPTY_OUTPUT_URI)]
    assert (store.puts, store.part_calls, store.objects) == (0, 0, {})


def test_the_parts_go_once_the_whole_log_is_stored() -> None:
    store = MemoryOutputStore()
    ex, api = executor_with(store)
    h = held(ex, b"line 1\n")
    assert ex._live is not None and ex._live.tick() == 7
    assert live_bytes(store, TASK_KEY) == b"line 1\n"
    h.ctx.log.write(b"line 2\n")
    ex._finish(h, True, b"r", "")
    uri = api.completions[0][3]
    assert sorted(store.objects) == [TASK_KEY.relpath() + ".log", TASK_KEY.relpath() + ".result"]
    assert OutputReader(memory=store).read(uri) == (b"line 1\nline 2\n", b"r")


def test_a_lost_lease_drops_its_parts_and_a_failed_store_keeps_them() -> None:
    store = MemoryOutputStore()
    ex, api = executor_with(store)
    h = held(ex, b"doomed\n")
    assert ex._live is not None and ex._live.tick()
    h.lost = True
    ex._finish(h, False, b"", "lease lost")
    assert store.objects == {} and api.completions == []
    store.failures = 100  # the final put fails for good: the parts are all that is left of the log
    h = held(ex, b"kept\n")
    assert ex._live.tick()
    ex._finish(h, True, b"", "")
    assert api.completions[0][3] == "" and "output missing" in api.completions[0][2]
    assert live_bytes(store, TASK_KEY) == b"kept\n"


def test_live_output_can_be_turned_off() -> None:
    ex = Executor(FakeApi(), ["q"], output=MemoryOutputStore(), live=LiveSettings(interval_s=0))  # type: ignore[arg-type]
    assert ex._live is None


def test_parts_that_cannot_be_removed_are_left_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    class NoDelete(MemoryOutputStore):
        def delete_parts(self, key: OutputKey, parts: list[tuple[int, bool]]) -> None:
            raise OSError("AccessDenied: no s3:DeleteObject")

    store = NoDelete()
    ex, api = executor_with(store)
    for _ in range(2):
        h = held(ex, b"text\n")
        assert ex._live is not None and ex._live.tick()
        ex._finish(h, True, b"", "")
    assert [c[0] for c in api.completions] == [True, True] and all(c[3].startswith("mem://") for c in api.completions)
    said = [r for r in caplog.records if "live log parts failed" in r.message and r.levelname == "WARNING"]
    assert len(said) == 1 and "s3:DeleteObject" in said[0].message
