"""RunFollower against scripted streams: it resumes after the last point it got on the next node, drops
what it already has, and after OUT_OF_RANGE says so and starts again from the existing runs."""

from __future__ import annotations

from typing import Any, Iterator

import grpc
import pytest

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.errors import ClusterUnreachable
from raftsched.rpc.client.watch import RunFollower

pytestmark = pytest.mark.unit


class Broken(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def ev(kind: str, index: int, position: int = 0, run_id: str = "") -> pb.RunEvent:
    e = pb.RunEvent(kind=kind, index=index, position=position)
    if run_id:
        e.run.run_id = run_id
    return e


class ScriptedClient:
    """``watch_runs`` plays one script per call: events, then an error (or the end)."""

    def __init__(self, scripts: list[tuple[list[pb.RunEvent], Exception | None]]) -> None:
        self.scripts = scripts
        self.calls: list[dict[str, Any]] = []
        self.streams: list[Played] = []
        self.addresses = ["a:1", "b:2", "c:3"]
        self.source = ""
        self._current = 0

    @property
    def current_address(self) -> str:
        return self.addresses[self._current]

    def rotate(self) -> str:
        self._current = (self._current + 1) % len(self.addresses)
        return self.current_address

    def watch_runs(
        self, job_id: str, queue: str, include_existing: bool, kinds: list[str], resume_after: Any, bookmarks: bool
    ) -> Played:
        self.calls.append({"existing": include_existing, "resume_after": resume_after, "address": self.current_address})
        events, error = (
            self.scripts.pop(0) if self.scripts else ([], Broken(grpc.StatusCode.CANCELLED, "Locally cancelled by application!"))
        )

        self.streams.append(Played(events, error))
        return self.streams[-1]


class Played:
    """A scripted stream: its events, then its error (or the end); ``cancel()`` as a gRPC call has it."""

    def __init__(self, events: list[pb.RunEvent], error: Exception | None) -> None:
        self.events, self.error, self.cancelled = events, error, False

    def cancel(self) -> None:
        self.cancelled = True

    def __iter__(self) -> Iterator[pb.RunEvent]:
        for event in self.events:
            if self.cancelled:
                raise Broken(grpc.StatusCode.CANCELLED, "Locally cancelled by application!")
            yield event
        if self.error is not None:
            raise self.error


def follow(client: ScriptedClient, **kw: Any) -> tuple[list[tuple[str, int, int]], list[str]]:
    notes: list[str] = []
    follower = RunFollower(client, notices=notes.append, **kw)  # type: ignore[arg-type]
    return [(e.kind, e.index, e.position) for e in follower], notes


def test_a_dead_node_is_left_for_the_next_and_the_stream_resumes_after_the_last_point() -> None:
    dropped = Broken(grpc.StatusCode.UNAVAILABLE, "Socket closed")
    client = ScriptedClient([
        ([ev("bookmark", 10, 0), ev("fired", 11, 0, "r1"), ev("leased", 12, 0, "r1")], dropped),
        ([ev("leased", 12, 0, "r1"), ev("finished", 13, 0, "r1"), ev("bookmark", 13, 1)], None),
        ([ev("fired", 14, 1, "r2")], None),
    ])  # fmt: skip
    got, notes = follow(client)
    assert got == [("fired", 11, 0), ("leased", 12, 0), ("finished", 13, 0), ("fired", 14, 1)]  # bookmarks and repeats dropped
    assert [c["resume_after"] for c in client.calls] == [None, (12, 0), (13, 1), (14, 1)]
    assert [c["address"] for c in client.calls[:2]] == ["a:1", "b:2"]
    assert any("a:1 stopped streaming" in n and "index 12.0" in n for n in notes), notes
    assert any("streaming from b:2, resumed after index 12.0" in n for n in notes), notes


def test_a_point_the_node_no_longer_holds_starts_again_from_the_existing_runs() -> None:
    gone = Broken(grpc.StatusCode.OUT_OF_RANGE, "resume point 5.0 is older than this node's history")
    client = ScriptedClient([
        ([ev("fired", 5, 0, "r1")], Broken(grpc.StatusCode.UNAVAILABLE, "Socket closed")),
        ([], gone),
        ([ev("existing", 0, 0, "r1"), ev("bookmark", 40, 0), ev("leased", 41, 0, "r1")], None),
    ])  # fmt: skip
    got, notes = follow(client)
    assert got == [("fired", 5, 0), ("existing", 0, 0), ("leased", 41, 0)]
    assert [(c["existing"], c["resume_after"]) for c in client.calls[:3]] == [(False, None), (False, (5, 0)), (True, None)]
    assert any("no longer holds the changes after index 5.0" in n and "not shown" in n for n in notes), notes


def test_no_node_answering_gives_up_with_a_readable_error() -> None:
    refused = Broken(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; Connection refused")
    client = ScriptedClient([([], refused)] * 100)
    with pytest.raises(ClusterUnreachable) as err:
        follow(client, first_give_up_s=0.3)
    assert "no node of the cluster answers at a:1, b:2, c:3" in str(err.value)


def test_other_errors_are_not_retried() -> None:
    client = ScriptedClient([([], Broken(grpc.StatusCode.INVALID_ARGUMENT, "unknown event kind"))])
    with pytest.raises(grpc.RpcError):
        follow(client)


def test_cancel_during_a_stream_ends_the_iteration_without_trying_another_node() -> None:
    client = ScriptedClient([([ev("fired", 1, 0, "r1"), ev("leased", 2, 0, "r1"), ev("finished", 3, 0, "r1")], None)])
    follower = RunFollower(client)  # type: ignore[arg-type]
    got = []
    for event in follower:
        got.append(event.kind)
        if len(got) == 2:
            follower.cancel()  # what Ctrl-C does in `raftsched run watch`
    assert got == ["fired", "leased"] and client.streams[0].cancelled
    assert [c["address"] for c in client.calls] == ["a:1"]


def test_cancel_during_a_failover_opens_no_other_stream() -> None:
    client = ScriptedClient([([ev("fired", 1, 0, "r1")], Broken(grpc.StatusCode.UNAVAILABLE, "Socket closed"))] * 3)
    follower: RunFollower

    def notice(text: str) -> None:
        if "stopped streaming" in text:
            follower.cancel()  # Ctrl-C while the watch moves to the next node

    follower = RunFollower(client, notices=notice)  # type: ignore[arg-type]
    assert [e.kind for e in follower] == ["fired"]
    assert len(client.calls) == 1
