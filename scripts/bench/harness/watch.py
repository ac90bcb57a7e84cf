"""Seeing what the cluster does, from threads of the parent: WatchRuns streams and ClusterStatus pollers.

* ``Watcher``      — one node's ``fired`` events, kept as ``Fired`` records;
  reconnects after a kill until stopped (fire lag, failover);
* ``RunWatch``     — one node's events of one kind handed to a callback (due-to-leased);
* ``StatusPoller`` — a number read from one node's ClusterStatus every period
  (burst, end-to-end): no stream, so next to no load on the node measured.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from bench.harness.common import now_ms, ts_ms
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc


@dataclass
class Fired:
    run_id: str
    scheduled_ms: int
    fired_ms: int
    observed_ms: int
    node: str


class Watcher:
    """A WatchRuns stream on one node, in a thread; keeps every ``fired`` event.

    Reconnects when the stream breaks (a killed node) until stopped.
    """

    def __init__(self, node_id: str, address: str, queue_name: str = "") -> None:
        self.node_id, self.address, self.queue_name = node_id, address, queue_name
        self.fired: list[Fired] = []
        self.breaks: list[tuple[int, str]] = []
        self.connected_at: list[int] = []
        self._stop = threading.Event()
        self._call: Any = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"watch-{node_id}", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            ch = grpc.insecure_channel(self.address, options=[("grpc.max_receive_message_length", 64 << 20)])
            try:
                grpc.channel_ready_future(ch).result(timeout=2.0)
                self._stream(ch)
            except grpc.FutureTimeoutError:
                pass
            except grpc.RpcError as exc:
                if not self._stop.is_set():
                    self.breaks.append((now_ms(), f"{exc.code().name}: {exc.details()}"))  # type: ignore[attr-defined]
            finally:
                ch.close()
            self._stop.wait(0.2)

    def _stream(self, ch: grpc.Channel) -> None:
        # fires only: streaming every lease and completion too would load the node being measured
        req = pb.WatchRunsRequest(queue=self.queue_name, kinds=["fired"])
        call = pb_grpc.JobServiceStub(ch).WatchRuns(req)
        with self._lock:
            self._call = call
        if self._stop.is_set():
            call.cancel()
        self.connected_at.append(now_ms())
        append, node = self.fired.append, self.node_id
        for ev in call:
            run = ev.run
            append(Fired(run.run_id, ts_ms(run.scheduled_time), ts_ms(run.fired_at), ts_ms(ev.observed_at), node))

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()
        self._thread.join(timeout=5)


class RunWatch:
    """A WatchRuns stream on the node at ``address``, in a thread, handing every event of ``kind``
    on ``queue_name`` to ``on_event``; no reconnect (the scenarios using it kill no node)."""

    def __init__(self, address: str, queue_name: str, kind: str, on_event: Callable[[Any], None]) -> None:
        self._address = address
        self._request = pb.WatchRunsRequest(queue=queue_name, kinds=[kind])  # only the events counted
        self._on_event = on_event
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with grpc.insecure_channel(self._address) as ch:
            call = pb_grpc.JobServiceStub(ch).WatchRuns(self._request)
            threading.Thread(target=lambda: (self._stop.wait(), call.cancel()), daemon=True).start()
            try:
                for ev in call:
                    self._on_event(ev)
            except grpc.RpcError:
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class StatusPoller:
    """Polls one node's ClusterStatus every ``period`` s and keeps ``(time, pick(status))``.

    GetClusterStatus reads the node's applied state (no Raft round trip) and
    streams nothing, so counting this way costs the cluster next to nothing,
    where watching every event would load the node with a stream.
    """

    def __init__(self, address: str, pick: Callable[[Any], int], period: float = 0.1, in_ms: bool = False) -> None:
        self._address = address
        self._pick = pick
        self._period = period
        self._scale = 1000.0 if in_ms else 1.0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with grpc.insecure_channel(self._address) as ch:
            stub = pb_grpc.ClusterServiceStub(ch)
            while not self._stop.is_set():
                try:
                    status = stub.GetClusterStatus(pb.GetClusterStatusRequest(), timeout=2)
                    self.samples.append((time.time() * self._scale, self._pick(status)))
                except grpc.RpcError:
                    pass
                self._stop.wait(self._period)

    def latest(self) -> int:
        return self.samples[-1][1] if self.samples else 0

    def grown(self) -> bool:
        return len(self.samples) > 1 and self.samples[-1][1] > self.samples[0][1]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
