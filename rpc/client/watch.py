"""Follow run changes across node failures: WatchRuns that fails over and resumes where it was.

``RunFollower(client, job_id=..., queue=..., kinds=...)`` is an iterator of
``RunEvent``s. It asks for bookmarks and remembers the position of the last
event (or bookmark) it got; when its node dies, stops or falls behind, it
moves to the next node of the client and resumes after that position, so
every change the new node still holds in its history arrives once and in
order (it also drops anything at or before the position, should a node
send it). When the position is older than the new node's history
(OUT_OF_RANGE), it says so and watches again from the node's existing runs
(``include_existing``): what changed in between is then not replayed.

``cancel()`` (from another thread or a signal handler) ends the iteration
cleanly: the stream is cancelled and no other node is tried.

``notices`` (a callback) hears, in one line each, where it streams from and
of each failover; ``connected(address)`` is called when a stream starts.
When no node answers — every one tried, for ``give_up_s``
(``first_give_up_s`` before any node ever answered) — the follower raises
``ClusterUnreachable``.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator

import grpc

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client
from raftsched.rpc.client.errors import ClusterUnreachable, describe, unreachable

#: a stream that broke with one of these is taken up on the next node
_FAILOVER = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,  # this watcher fell behind (or the node's watch slots are full)
}


class RunFollower:
    def __init__(
        self,
        client: Client,
        job_id: str = "",
        queue: str = "",
        kinds: list[str] | None = None,
        include_existing: bool = False,
        notices: Callable[[str], None] = lambda _text: None,
        give_up_s: float = 30.0,
        first_give_up_s: float = 2.0,
        connected: Callable[[str], None] = lambda _address: None,
    ) -> None:
        self.client = client
        self.job_id, self.queue, self.kinds = job_id, queue, list(kinds or [])
        self.include_existing = include_existing
        self.notices = notices
        self.connected = connected
        self.give_up_s = give_up_s
        self.first_give_up_s = first_give_up_s
        self.answered = False  # some node streamed something
        #: the (index, position) after which the next stream resumes; None before the first event
        self.position: tuple[int, int] | None = None
        self.failovers = 0
        self._call: grpc.Call | None = None
        self._stopped = False

    @property
    def address(self) -> str:
        """The node streamed from now."""
        return self.client.current_address

    def cancel(self) -> None:
        """Stop: the stream is cancelled and the iteration ends without trying another node."""
        self._stopped = True
        if self._call is not None:
            self._call.cancel()

    def __iter__(self) -> Iterator[pb.RunEvent]:
        self._existing = self.include_existing
        self._down_since: float | None = None  # when the current outage began (no node streamed since)
        self._down: set[str] = set()  # the nodes that could not be reached in it
        self._told = False  # the current outage was reported
        while not self._stopped:
            try:
                yield from self._one_stream()
                why = "the stream ended"
            except grpc.RpcError as exc:
                if self._stopped or exc.code() == grpc.StatusCode.CANCELLED and self._cancelled(exc):
                    return
                if exc.code() == grpc.StatusCode.OUT_OF_RANGE:
                    self.notices(
                        f"{self.address} no longer holds the changes after {_point(self.position)} ({describe(exc)}); "
                        "watching again from the runs that exist now: changes in between are not shown"
                    )
                    self.position, self._existing = None, True
                    continue
                if exc.code() not in _FAILOVER:
                    raise
                self._count_outage(exc)
                why = describe(exc)
            if self.answered and not self._told:
                self._told = True
                self.failovers += 1
                self.notices(f"{self.address} stopped streaming ({why}); resuming after {_point(self.position)} on another node")
            self.client.rotate()
            time.sleep(0.1 if self._down_since is None else 0.25)

    def _one_stream(self) -> Iterator[pb.RunEvent]:
        """One WatchRuns call on the current node, resumed after ``position``; its events, bookmarks
        and repeats left out."""
        resumed_from = self.position
        existing = self._existing and self.position is None
        self._call = stream = self.client.watch_runs(self.job_id, self.queue, existing, self.kinds, self.position, bookmarks=True)
        if self._stopped:  # cancelled while this stream was being opened
            self.cancel()
            return
        fresh = True
        for event in stream:
            if fresh:
                fresh = False
                self.connected(self.address)
                after = f", resumed after {_point(resumed_from)}" if self.answered else ""
                self.notices(f"streaming from {self.address}{after}")
            self._down_since, self._told, self.answered = None, False, True
            if event.index:
                point = (event.index, event.position)
                if self.position is not None and point <= self.position:
                    continue  # sent before the failover
                self.position = point
            if event.kind != "bookmark":
                yield event

    def _count_outage(self, exc: grpc.RpcError) -> None:
        """Raise ``ClusterUnreachable`` once every node was tried and none streamed for long enough."""
        if not unreachable(exc):
            return
        if self._down_since is None:
            self._down_since, self._down = time.monotonic(), set()
        self._down.add(self.address)
        limit = self.give_up_s if self.answered else self.first_give_up_s
        if time.monotonic() - self._down_since >= limit and len(self._down) == len(self.client.addresses):
            raise ClusterUnreachable(self.client.addresses, exc, self.client.source) from None

    def _cancelled(self, exc: grpc.RpcError) -> bool:
        """Cancelled by us (``cancel``), not by a node going away."""
        return "locally cancelled" in (exc.details() or "").lower()


def _point(position: tuple[int, int] | None) -> str:
    return "the start" if position is None else f"index {position[0]}.{position[1]}"
