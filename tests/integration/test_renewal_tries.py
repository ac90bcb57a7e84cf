"""An executor's renewal keeps trying often while no node can answer it (an election), and gives up on a node
that holds it (a follower waiting for a dead leader) within its time: after a leader change the new leader
keeps the leases only for a grace period of one TTL, and the renewal must reach it within that.

Seen in CI: the run of ``test_renewing_run_survives_leader_sigkill_and_is_never_handed_out_twice`` was handed
out again because the renewal, backing off to 1.5 s between tries and waiting 10 s on one, arrived late."""

from __future__ import annotations

import socket
import threading
import time
from concurrent import futures
from typing import Iterator

import grpc
import pytest

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.client import Client
from raftsched.rpc.client.errors import RpcFailure
from raftsched.rpc.client.lease_api import RENEW_MAX_PAUSE_S, GrpcLeaseApi

pytestmark = pytest.mark.integration

LEASES = [("L1001", 1001)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Electing(pb_grpc.LeaseServiceServicer):
    """Answers UNAVAILABLE (no leader) until ``until`` (monotonic), then renews; or holds every call ``hold_s``."""

    def __init__(self, until: float = 0.0, hold_s: float = 0.0) -> None:
        self.until, self.hold_s = until, hold_s
        self.tries: list[float] = []
        self._lock = threading.Lock()

    def RenewLease(self, request: pb.RenewLeaseRequest, context: grpc.ServicerContext) -> pb.RenewLeaseResponse:
        now = time.monotonic()
        with self._lock:
            self.tries.append(now)
        if self.hold_s:
            time.sleep(self.hold_s)
        if now < self.until:
            context.abort(grpc.StatusCode.UNAVAILABLE, "no leader is known yet (an election may be under way); retry")
        resp = pb.RenewLeaseResponse()
        for lease in request.leases:
            resp.leases.add(lease_id=lease.lease_id, ok=True)
        return resp


class HeldStatus(pb_grpc.ClusterServiceServicer):
    """Holds every GetClusterStatus ``hold_s`` (a frozen node, or one slow to say who leads), then names no leader."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.asked: list[float] = []

    def GetClusterStatus(self, request: pb.GetClusterStatusRequest, context: grpc.ServicerContext) -> pb.ClusterStatus:
        self.asked.append(time.monotonic())
        time.sleep(self.hold_s)
        return pb.ClusterStatus()


def _serve(servicer: Electing, status: HeldStatus | None = None) -> Iterator[str]:
    address = f"127.0.0.1:{_free_port()}"
    server = grpc.server(futures.ThreadPoolExecutor(4))
    pb_grpc.add_LeaseServiceServicer_to_server(servicer, server)
    if status is not None:
        pb_grpc.add_ClusterServiceServicer_to_server(status, server)
    assert server.add_insecure_port(address)
    server.start()
    try:
        yield address
    finally:
        server.stop(0)


@pytest.fixture()
def electing() -> Iterator[tuple[Electing, str]]:
    servicer = Electing(until=time.monotonic() + 3.0)
    for address in _serve(servicer):
        yield servicer, address


@pytest.fixture()
def holding() -> Iterator[tuple[Electing, str]]:
    servicer = Electing(hold_s=3.0)
    for address in _serve(servicer):
        yield servicer, address


def test_a_renewal_tries_often_while_no_leader_answers(electing: tuple[Electing, str]) -> None:
    servicer, address = electing
    with Client([address], deadline_s=30, prefer_leader=False) as client:
        api = GrpcLeaseApi(client, "exec-1")
        answered = None
        while answered is None:  # what the executor's renewal loop does: a period each, again at once if unanswered
            try:
                answered = api.renew(LEASES, within_s=0.7)
            except RpcFailure as exc:
                assert exc.code_name == "UNAVAILABLE"
    assert [r.ok for r in answered] == [True]
    gaps = [b - a for a, b in zip(servicer.tries, servicer.tries[1:])]
    assert len(gaps) >= 10, gaps
    # without the cap the backoff reaches 0.5-1.5 s between tries within the 3 s of "no leader"
    assert max(gaps) < RENEW_MAX_PAUSE_S + 0.3, gaps


def test_a_renewal_held_by_a_node_gives_up_within_its_time(holding: tuple[Electing, str]) -> None:
    servicer, address = holding
    with Client([address], deadline_s=30, call_timeout_s=10) as client:
        api = GrpcLeaseApi(client, "exec-1")
        started = time.monotonic()
        with pytest.raises(RpcFailure) as failed:
            api.renew(LEASES, within_s=0.5)
        took = time.monotonic() - started
    assert failed.value.code_name == "DEADLINE_EXCEEDED"
    assert took < 2.5, f"the renewal waited {took:.1f} s on a node that held it (the node holds calls 3 s)"
    assert len(servicer.tries) == 1


def test_a_renewal_a_frozen_node_holds_is_answered_by_another_within_its_time(
    holding: tuple[Electing, str], electing: tuple[Electing, str]
) -> None:
    """A leader frozen by SIGSTOP keeps its TCP connections open and answers nothing: the renewal tries the
    next node within the same period, and the next renewal starts there, not at the frozen node again."""
    frozen, frozen_address = holding
    other, other_address = electing
    other.until = 0.0  # answers at once
    with Client([frozen_address, other_address], deadline_s=30, call_timeout_s=10, prefer_leader=False) as client:
        client._current = 0  # the frozen node first, as when it was the leader
        api = GrpcLeaseApi(client, "exec-1")
        started = time.monotonic()
        answered = api.renew(LEASES, within_s=0.8)
        took = time.monotonic() - started
        assert [r.ok for r in answered] == [True]
        assert took < 0.8 + 0.3, f"the renewal took {took:.2f} s"
        assert len(frozen.tries) == 1 and len(other.tries) == 1
        api.renew(LEASES, within_s=0.8)
    assert len(frozen.tries) == 1, "the next renewal went to the frozen node again"
    assert len(other.tries) == 2


def test_a_renewal_does_not_spend_its_time_asking_a_slow_node_who_leads(electing: tuple[Electing, str]) -> None:
    """A ``prefer_leader`` client (an executor's) asks who leads every few seconds, inside whichever call comes
    due. Asked of a node that holds its calls (frozen, or slow while its clock is in doubt), the look takes at
    most half of a renewal's time, and the renewal then goes to another node and is answered within its time
    (a look of up to 2 s inside a renewal of 0.67 s could outlast a new leader's grace)."""
    other, other_address = electing
    other.until = 0.0  # answers at once
    frozen, status = Electing(hold_s=3.0), HeldStatus(3.0)
    for frozen_address in _serve(frozen, status):
        with Client([frozen_address, other_address], deadline_s=30, call_timeout_s=10, prefer_leader=True) as client:
            client._current = 0  # the slow node first, as when it was the leader; the look for the leader is due
            api = GrpcLeaseApi(client, "exec-1")
            started = time.monotonic()
            answered = api.renew(LEASES, within_s=0.7)
            took = time.monotonic() - started
        assert len(status.asked) == 1, "the client did not look for the leader"
        assert [r.ok for r in answered] == [True]
        assert took < 0.7 + 0.3, f"the renewal took {took:.2f} s"
        assert frozen.tries == [] and len(other.tries) == 1
