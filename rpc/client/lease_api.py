"""The executor's view of LeaseService: domain values in, domain values out.

A failed call leaves as ``LeaseLost`` (a stale lease or token:
FAILED_PRECONDITION) or as ``RpcFailure``, whose text is one readable line
(``raftsched.rpc.client.errors.describe``): the executor logs it as it is.

Heartbeats: a lease's ``last_heartbeat_details`` become ``Task.last_heartbeat``;
a renewal's ``details`` go in each ``LeaseRef``; a completion's
``non_retryable`` and ``retry_after_ms`` in ``CompleteRunRequest``.
"""

from __future__ import annotations

import time

import grpc

from raftsched.cluster.domain import limits as lim
from raftsched.cluster.domain.leases import Renewal
from raftsched.cluster.executor.ports import Finished, LeaseLost, Task
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from raftsched.rpc.client.errors import RpcFailure


class GrpcLeaseApi:
    """Implements ``raftsched.cluster.executor.ports.LeaseApi`` over gRPC, following the leader through any node."""

    def __init__(self, client: Client, executor_id: str) -> None:
        self.client = client
        self.executor_id = executor_id

    def acquire(self, queues: list[str], max_runs: int, wait_ms: int, types: list[str] | None = None) -> list[Task]:
        req = pb.AcquireLeaseRequest(executor_id=self.executor_id, queues=queues, max_runs=max_runs, types=types or [])
        cv.to_dur(wait_ms, req.wait)
        try:
            # no node at all: say so soon (the executor logs it and asks again); a completion keeps trying
            resp = self.client.lease("AcquireLease", req, timeout=wait_ms / 1000.0 + 10, unreachable_after_s=ACQUIRE_PATIENCE_S)
        except grpc.RpcError as exc:
            raise RpcFailure(exc) from None
        return [
            Task(
                lease_id=lease.lease_id,
                fencing_token=lease.fencing_token,
                run_id=lease.run.run_id,
                job_id=lease.run.job_id,
                attempt=lease.run.attempt,
                type=lease.type,
                payload=bytes(lease.payload),
                timeout_ms=cv.dur_ms(lease.timeout),
                expires_ms=cv.ts_ms(lease.expires_at),
                scheduled_ms=cv.ts_ms(lease.run.scheduled_time),
                last_heartbeat=bytes(lease.last_heartbeat_details),
            )
            for lease in resp.leases
        ]

    def renew(
        self, leases: list[tuple[str, int]], within_s: float | None = None, details: dict[str, bytes] | None = None
    ) -> list[Renewal]:
        """Renew ``leases``; ``details``: heartbeat details by lease id. Details beyond what one call may carry
        (``MAX_RENEW_DETAILS_BYTES``) go in further calls, one after the other."""
        details = details or {}
        out: list[Renewal] = []
        for part in _by_details_size(leases, details):
            out.extend(self._renew(part, within_s, details))
        return out

    def _renew(self, leases: list[tuple[str, int]], within_s: float | None, details: dict[str, bytes]) -> list[Renewal]:
        req = pb.RenewLeaseRequest(executor_id=self.executor_id)
        for lease_id, token in leases:
            req.leases.add(lease_id=lease_id, fencing_token=token, details=details.get(lease_id, b""))
        try:
            if within_s is None:
                resp = self.client.lease("RenewLease", req)
            else:  # give up after within_s, trying other nodes often meanwhile (see ``RENEW_MAX_PAUSE_S``)
                # a try is given half the time, so a node that does not answer (frozen, cut off) leaves
                # time for another one within the same renewal
                pause = min(RENEW_MAX_PAUSE_S, within_s / 4)
                resp = self.client.lease(
                    "RenewLease", req, timeout=within_s / 2, deadline_s=within_s, max_pause_s=pause, idempotent=True
                )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise RpcFailure(exc) from None
            return [Renewal(lease_id, False, 0, False, exc.details()) for lease_id, _ in leases]
        return [Renewal(r.lease_id, r.ok, cv.ts_ms(r.expires_at), r.cancel_requested, r.error) for r in resp.leases]

    def complete(self, finished: Finished) -> None:
        try:
            self.client.lease("CompleteRun", _complete_request(finished, self.executor_id))
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                raise LeaseLost(exc.details()) from None
            raise RpcFailure(exc) from None

    def complete_many(self, done: list[Finished]) -> list[Exception | None]:
        """Several completions in one CompleteRuns call; per run None, ``LeaseLost`` or another error.
        Items answered UNAVAILABLE are sent again (a few times); a node that does not know
        CompleteRuns yet (UNIMPLEMENTED) gets them one by one."""
        out: list[Exception | None] = [None] * len(done)
        todo = list(range(len(done)))
        for attempt in range(UNAVAILABLE_ROUNDS):
            req = pb.CompleteRunsRequest(runs=[_complete_request(done[i], self.executor_id) for i in todo], status_only=True)
            try:
                resp = self.client.lease("CompleteRuns", req)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise RpcFailure(exc) from None
                return [self._complete_one(item) for item in done]
            retry = []
            for i, r in zip(todo, resp.results):
                out[i] = _item_error(r.status)
                if r.status.code == _UNAVAILABLE:
                    retry.append(i)
            if not retry:
                break
            todo = retry
            time.sleep(0.1 * (attempt + 1))
        return out

    def _complete_one(self, item: Finished) -> Exception | None:
        try:
            self.complete(item)
            return None
        except Exception as exc:  # noqa: BLE001 - reported per item
            return exc


UNAVAILABLE_ROUNDS = 4
#: the longest pause between a renewal's tries: after a leader change the new leader keeps the leases
#: for a grace period of one TTL from its election, and the renewal must reach it within that
RENEW_MAX_PAUSE_S = 0.2
#: how long an acquire waits for any node to answer before it fails (and the executor logs it)
ACQUIRE_PATIENCE_S = 5.0


def _by_details_size(leases: list[tuple[str, int]], details: dict[str, bytes]) -> list[list[tuple[str, int]]]:
    """``leases`` in parts whose heartbeat details fit one RenewLease call (one part when they all fit)."""
    parts: list[list[tuple[str, int]]] = [[]]
    size = 0
    for ref in leases:
        n = len(details.get(ref[0], b""))
        if n and size + n > lim.MAX_RENEW_DETAILS_BYTES and parts[-1]:
            parts.append([])
            size = 0
        parts[-1].append(ref)
        size += n
    return parts


def _complete_request(done: Finished, executor_id: str) -> pb.CompleteRunRequest:
    req = pb.CompleteRunRequest(
        executor_id=executor_id,
        lease_id=done.task.lease_id,
        fencing_token=done.task.fencing_token,
        outcome=pb.OUTCOME_SUCCEEDED if done.succeeded else pb.OUTCOME_FAILED,
        result=done.result,
        error=done.error,
        log_uri=done.log_uri,
        non_retryable=not done.succeeded and done.non_retryable,
    )
    if not done.succeeded and not done.non_retryable and done.retry_after_ms > 0:
        cv.to_dur(done.retry_after_ms, req.retry_after)
    return req


_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]
_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def _item_error(status: pb.ItemStatus) -> Exception | None:
    if status.code == 0:
        return None
    if status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]:
        return LeaseLost(status.message)
    return RuntimeError(f"{_CODE_NAMES.get(status.code, status.code)}: {status.message}")
