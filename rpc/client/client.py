"""A Python client for a raftsched cluster: any node, retries on UNAVAILABLE.

``Client(["127.0.0.1:50051", ...])`` keeps a channel per node and sends each
call to the node that answered last; UNAVAILABLE (no leader yet, node down)
moves to the next node with exponential backoff until ``deadline_s``; a
stream (``backup``, ``watch_runs``) starts on the first node whose connection
comes up. A node that does not complete a connection within
``connect_timeout_s`` counts as down (gRPC's own default waits 20 s). When no
node answers at all — every failure is one of reaching a node, not an answer
— the call raises ``ClusterUnreachable`` ("no node of the cluster answers at
...: is it running?"): once every node was tried and ``unreachable_after_s``
has passed, when set (the command line: 0.6 s), else at the deadline. With
``prefer_leader=True`` (what executors use) it sends to the leader when the
leader is among its addresses, asking who leads every ``LEADER_CHECK_S`` (an
UNAVAILABLE rotates as usual and defers the next look): any node answers, but
a follower only forwards.
CreateJob always carries an idempotency key (a fresh one unless you pass
yours), so a retried create never makes two jobs. Every mutating call
(``MUTATING``) carries a ``request_id`` — a fresh one unless the request
has its own — and every retry of that call sends the same one: a call whose
answer was lost (UNAVAILABLE can mean "committed late") is not applied
twice (a retried TriggerJob makes one run). ``security`` (a
``ChannelSecurity``) turns on TLS, a client certificate and a bearer token for
every call; without it the channels are plaintext with no token.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from typing import Any, Iterator

import grpc

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.channel import ChannelSecurity, close_channel, connects, open_channel
from raftsched.rpc.client.errors import ClusterUnreachable, unreachable

log = logging.getLogger("raftsched.client")

RETRYABLE = (grpc.StatusCode.UNAVAILABLE,)
#: JobService methods that change the state: each call gets a request_id (CreateJobs: each item)
MUTATING = frozenset(
    {"CreateJob", "CreateJobs", "UpdateJob", "PauseJob", "ResumeJob", "DeleteJob", "TriggerJob", "CancelRun", "RetryRun"}
)


def new_request_id() -> str:
    return f"rq-{uuid.uuid4().hex}"


def with_request_id(method: str, request: Any) -> Any:
    """A copy of a mutating request with a request_id wherever it has none (the caller's request is not changed:
    reusing it for a new call must not repeat the old one's id)."""
    if method not in MUTATING:
        return request
    items = list(request.jobs) if method == "CreateJobs" else [request]
    if all(item.request_id for item in items):
        return request
    copy = type(request)()
    copy.CopyFrom(request)
    for item in copy.jobs if method == "CreateJobs" else [copy]:
        if not item.request_id:
            item.request_id = new_request_id()
    return copy


#: the longest pause between two tries of one call (the backoff doubles from 50 ms up to it, with jitter)
MAX_PAUSE_S = 1.5
#: the shortest time a try is given, however near the call's deadline
MIN_TRY_S = 0.05
#: how often a ``prefer_leader`` client asks who leads (besides after an UNAVAILABLE)
LEADER_CHECK_S = 5.0
#: the longest a look for the leader waits for the node it asks
LEADER_LOOK_S = 2.0


class Client:
    def __init__(
        self,
        addresses: list[str] | str,
        deadline_s: float = 15.0,
        call_timeout_s: float = 10.0,
        prefer_leader: bool = False,
        security: ChannelSecurity | None = None,
        connect_timeout_s: float = 5.0,
        unreachable_after_s: float | None = None,
    ) -> None:
        if isinstance(addresses, str):
            addresses = [a.strip() for a in addresses.split(",") if a.strip()]
        if not addresses:
            raise ValueError("give at least one node address (host:port)")
        self.addresses = list(addresses)
        self.deadline_s = deadline_s
        self.call_timeout_s = call_timeout_s
        #: give up after this long when no node answers at all (None: at ``deadline_s``)
        self.unreachable_after_s = unreachable_after_s
        #: where the addresses came from, named when no node answers (e.g. "local-cluster/client.toml")
        self.source = ""
        options = [
            ("grpc.max_receive_message_length", 64 << 20),
            # gRPC's minimum reconnect backoff is also its connect timeout (doc/connection-backoff.md):
            # a node that accepts TCP but never completes HTTP/2 (stopped, overloaded) fails after it
            ("grpc.min_reconnect_backoff_ms", int(connect_timeout_s * 1000)),
            ("grpc.initial_reconnect_backoff_ms", 250),
            ("grpc.max_reconnect_backoff_ms", 2000),  # a node back from a restart is found again soon
        ]
        self._channels = [open_channel(a, security, options) for a in addresses]
        self._jobs = [pb_grpc.JobServiceStub(ch) for ch in self._channels]
        self._leases = [pb_grpc.LeaseServiceStub(ch) for ch in self._channels]
        self._cluster = [pb_grpc.ClusterServiceStub(ch) for ch in self._channels]
        self._current = random.randrange(len(addresses))
        #: send to the leader when it is one of ``addresses``: a follower would only forward the
        #: command over Raft and learn of its commit a heartbeat later (executors set this)
        self.prefer_leader = prefer_leader
        self._leader_checked = -LEADER_CHECK_S  # monotonic time of the last look; never yet

    @property
    def current_address(self) -> str:
        """The node the next call goes to."""
        return self.addresses[self._current]

    def _follow_leader(self, within_s: float = LEADER_LOOK_S) -> None:
        """Point ``_current`` at the leader if the node asked knows one among our addresses (best effort), asking
        for at most ``within_s``; a node that does not answer is not the one the call then tries first."""
        self._leader_checked = time.monotonic()
        try:
            status = self._cluster[self._current].GetClusterStatus(pb.GetClusterStatusRequest(), timeout=within_s)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.PERMISSION_DENIED and self.prefer_leader:
                self.prefer_leader = False  # say it once; calls still go to any node
                log.warning(
                    "cannot ask who leads (%s); sending calls to any node: give the token the reader role too", exc.details()
                )
            elif unreachable(exc) or exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                self._current = (self._current + 1) % len(self._cluster)
            return
        for member in status.members:
            if member.id == status.leader_id and member.grpc_address in self.addresses:
                self._current = self.addresses.index(member.grpc_address)
                return

    def close(self) -> None:
        for ch in self._channels:
            close_channel(ch)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        stubs: list[Any],
        method: str,
        request: Any,
        timeout: float | None = None,
        unreachable_after_s: float | None = None,
        deadline_s: float | None = None,
        max_pause_s: float = MAX_PAUSE_S,
        idempotent: bool = False,
    ) -> Any:
        start = time.monotonic()
        deadline = start + (self.deadline_s if deadline_s is None else deadline_s)
        patience = self.unreachable_after_s if unreachable_after_s is None else unreachable_after_s
        give_up = None if patience is None else start + patience
        delay = 0.05
        answered = False  # some node gave an answer (an error included) during this call
        tried: set[int] = set()  # the nodes that could not be reached during this call
        while True:
            if self.prefer_leader and time.monotonic() - self._leader_checked >= LEADER_CHECK_S:
                # the look takes at most half of what is left of the call: a renewal, which has a TTL's third to
                # reach the leader, must not spend it on a node that is slow to say who leads
                self._follow_leader(min(LEADER_LOOK_S, max(MIN_TRY_S, (deadline - time.monotonic()) / 2)))
            stub = stubs[self._current]
            try:
                # no try outlives the call's deadline (a try held by a node waiting for a dead leader included)
                left = max(MIN_TRY_S, deadline - time.monotonic())
                return getattr(stub, method)(request, timeout=min(timeout or self.call_timeout_s, left))
            except grpc.RpcError as exc:
                lost = unreachable(exc)
                answered = answered or not lost
                if lost:
                    tried.add(self._current)
                timed_out = exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                if exc.code() not in RETRYABLE and not (
                    idempotent and timed_out and len(stubs) > 1 and time.monotonic() < deadline
                ):
                    if timed_out:
                        # a node that did not answer in time (frozen, partitioned, overloaded) is not
                        # the one the next call tries first: a renewal must not queue behind it again
                        self._current = (self._current + 1) % len(stubs)
                    raise
                now = time.monotonic()
                pause = min(delay * (0.5 + random.random()), max_pause_s)
                if not answered and give_up is not None:
                    if now >= give_up and len(tried) == len(stubs):  # every node tried, none answered
                        raise ClusterUnreachable(self.addresses, exc, self.source) from None
                    pause = min(pause, max(0.0, give_up - now))
                elif now + pause > deadline:
                    self._current = (self._current + 1) % len(stubs)  # the next call starts elsewhere
                    if not answered:
                        raise ClusterUnreachable(self.addresses, exc, self.source) from None
                    raise
                self._current = (self._current + 1) % len(stubs)
                # rotate like any client, and look for the leader again only later: a leader this
                # client cannot reach must not win every retry over the followers that forward
                self._leader_checked = time.monotonic()
                time.sleep(pause)
                delay = min(delay * 2, 1.0)

    def rotate(self) -> str:
        """Send the next calls (and watches) to the next node; its address."""
        self._current = (self._current + 1) % len(self.addresses)
        return self.current_address

    def job(self, method: str, request: Any, timeout: float | None = None) -> Any:
        """Call any JobService method by name; a mutating one with a request_id (one for all its retries)."""
        return self._call(self._jobs, method, with_request_id(method, request), timeout)

    def lease(
        self,
        method: str,
        request: Any,
        timeout: float | None = None,
        unreachable_after_s: float | None = None,
        deadline_s: float | None = None,
        max_pause_s: float = MAX_PAUSE_S,
        idempotent: bool = False,
    ) -> Any:
        """Call a LeaseService method; ``unreachable_after_s`` and ``deadline_s`` override the client's for
        this call, and ``max_pause_s`` caps the pause between its retries (a renewal must not sleep
        through a new leader's grace period). ``idempotent``: a try that timed out is tried again on
        the next node while the call's deadline allows (a renewal asked twice is renewed once)."""
        return self._call(self._leases, method, request, timeout, unreachable_after_s, deadline_s, max_pause_s, idempotent)

    def cluster(self, method: str, request: Any, timeout: float | None = None) -> Any:
        return self._call(self._cluster, method, request, timeout)

    # ---------------------------------------------------------------- helpers

    def create_job(self, spec: pb.JobSpec, idempotency_key: str = "") -> pb.Job:
        key = idempotency_key or f"auto-{uuid.uuid4().hex}"
        return self.job("CreateJob", pb.CreateJobRequest(spec=spec, idempotency_key=key))

    def trigger_job(self, job_id: str, request_id: str = "") -> pb.Run:
        return self.job("TriggerJob", pb.TriggerJobRequest(job_id=job_id, request_id=request_id))

    def cancel_run(self, run_id: str, request_id: str = "") -> pb.Run:
        return self.job("CancelRun", pb.CancelRunRequest(run_id=run_id, request_id=request_id))

    def retry_run(self, run_id: str, request_id: str = "") -> pb.Run:
        """A DEAD_LETTER, FAILED or CANCELLED run PENDING again (``RetryRun``)."""
        return self.job("RetryRun", pb.RetryRunRequest(run_id=run_id, request_id=request_id))

    def explain_run(self, run_id: str) -> pb.RunExplanation:
        return self.job("ExplainRun", pb.ExplainRunRequest(run_id=run_id))

    def get_job(self, job_id: str) -> pb.Job:
        return self.job("GetJob", pb.GetJobRequest(job_id=job_id))

    def get_run(self, run_id: str) -> pb.Run:
        return self.job("GetRun", pb.GetRunRequest(run_id=run_id))

    def list_runs(self, job_id: str = "", status: int = 0, page_size: int = 1000, label_selector: str = "") -> list[pb.Run]:
        """Every run (of a job, with a status, of jobs with these labels), following pages."""
        runs: list[pb.Run] = []
        token = ""
        while True:
            req = pb.ListRunsRequest(
                job_id=job_id, status=status, page_size=page_size, page_token=token,  # type: ignore[arg-type]
                label_selector=label_selector,
            )  # fmt: skip
            resp = self.job("ListRuns", req)
            runs.extend(resp.runs)
            token = resp.next_page_token
            if not token:
                return runs

    def list_jobs(
        self, queue: str = "", status: int = 0, name_prefix: str = "", page_size: int = 1000, label_selector: str = ""
    ) -> list[pb.Job]:
        jobs: list[pb.Job] = []
        token = ""
        while True:
            req = pb.ListJobsRequest(
                queue=queue, status=status, name_prefix=name_prefix, page_size=page_size, page_token=token,  # type: ignore[arg-type]
                label_selector=label_selector,
            )  # fmt: skip
            resp = self.job("ListJobs", req)
            jobs.extend(resp.jobs)
            token = resp.next_page_token
            if not token:
                return jobs

    def cluster_status(self) -> pb.ClusterStatus:
        return self.cluster("GetClusterStatus", pb.GetClusterStatusRequest())

    def who_am_i(self) -> pb.WhoAmIResponse:
        return self.cluster("WhoAmI", pb.WhoAmIRequest())

    def _reachable(self) -> int:
        """Point ``_current`` at the first node, from it on, whose connection comes up (``connects``; left as
        it is when none does), and return it: a stream, once begun, is not retried elsewhere."""
        for step in range(len(self._channels)):
            i = (self._current + step) % len(self._channels)
            if connects(self._channels[i]):
                self._current = i
                break
        return self._current

    def backup(self, timeout: float = 120.0) -> Iterator[pb.BackupChunk]:
        """The snapshot stream of ``Backup`` (admin) from a node that answers."""
        return iter(self._cluster[self._reachable()].Backup(pb.BackupRequest(), timeout=timeout))

    def watch_runs(
        self,
        job_id: str = "",
        queue: str = "",
        include_existing: bool = False,
        kinds: list[str] | None = None,
        resume_after: tuple[int, int] | None = None,
        bookmarks: bool = False,
    ) -> Iterator[pb.RunEvent]:
        """One WatchRuns stream from a node that answers (a ``grpc`` call: ``cancel()`` ends it). To follow
        the runs across node failures, resuming where the stream broke: ``raftsched.rpc.client.watch.RunFollower``."""
        stub = self._jobs[self._reachable()]
        req = pb.WatchRunsRequest(
            job_id=job_id, queue=queue, include_existing=include_existing, kinds=kinds or [], bookmarks=bookmarks
        )
        if resume_after is not None:
            req.resume_after.index, req.resume_after.position = resume_after
        return stub.WatchRuns(req)
