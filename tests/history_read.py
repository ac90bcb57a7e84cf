"""Reading a run history off a running cluster, for ``tests.history``.

- ``read_history`` asks every node, one client per node (each ``ListRuns`` and
  ``ListJobs`` is a linearizable read on the node asked), for the runs of the
  checked jobs and, given a name prefix, the ids of the jobs it knows
  (``read_nodes``: the same of nodes given by address, with TLS and a token).
- ``check_cluster`` reads them and runs ``check_history`` over every node of the cluster, once the nodes'
  readings agree or stay the same (``settled``).
- ``applied_entries_deleted``: the lines of the nodes' logs where pysyncobj says a follower deleted log
  entries it had applied (``check_cluster`` fails on any: ``raftsched.raft.log_overlap`` deletes only from
  a conflict, and an applied entry is committed, so a conflict with one is a broken guarantee).
- ``LeaseWatch`` follows one node's ``WatchRuns`` of a queue in a thread and
  records each lease from its grant to the change that ended it (retry or
  finish), numbered in that node's apply order: the observer's timeline that
  the "at most one lease holder" check runs on. Start it before anything on
  the queue can be leased and watch a node the test does not kill.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Iterable, Mapping, Sequence

import grpc

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.channel import ChannelSecurity
from raftsched.rpc.client.client import Client
from tests.history import Expected, History, LeaseRecord, RunRecord, check_history, replica_disagreements

#: how long ``settled`` reads again while the nodes' readings disagree and still change
SETTLE_S = 60.0
#: what pysyncobj logs when a follower deletes entries it has applied
APPLIED_DELETED = "truncating already-applied log entries"


def run_record(run: pb.Run) -> RunRecord:
    return RunRecord(
        run_id=run.run_id,
        job_id=run.job_id,
        scheduled_ms=cv.ts_ms(run.scheduled_time),
        status=pb.RunStatus.Name(run.status).removeprefix("RUN_STATUS_"),
        attempt=run.attempt,
        fencing_token=run.fencing_token,
        executor_id=run.executor_id,
        manual=run.manual,
        skipped_count=run.skipped_count,
        skipped_until_ms=cv.ts_ms(run.skipped_until) if run.HasField("skipped_until") else 0,
        error=run.error,
    )


#: the lease records a history is checked with: as read before, or a function that reads them
Leases = Sequence[LeaseRecord] | Callable[[], Sequence[LeaseRecord]]


def read_history(cluster: LocalCluster, job_ids: Iterable[str], job_prefix: str | None = None, leases: Leases = ()) -> History:
    """The runs of ``job_ids`` on every node, and (with ``job_prefix``) the ids of the jobs each node knows.
    ``leases`` given as a function is called once the nodes' runs are read: every attempt they show is then among
    the leases, even one an executor took while they were read (a retry of a run whose lease expired meanwhile,
    which lease records read before would not hold)."""
    addresses = {node.node_id: node.grpc for node in cluster.nodes.values()}
    history = read_nodes(addresses, job_ids, job_prefix, () if callable(leases) else leases, cluster.client_security())
    if callable(leases):
        history.leases = list(leases())
    return history


def read_nodes(
    addresses: Mapping[str, str],
    job_ids: Iterable[str],
    job_prefix: str | None = None,
    leases: Sequence[LeaseRecord] = (),
    security: ChannelSecurity | None = None,
) -> History:
    """``read_history`` of the nodes at ``addresses`` (node id -> gRPC address), called with ``security``."""
    ids = list(dict.fromkeys(job_ids))
    history = History(runs={}, leases=list(leases))
    for node_id, address in addresses.items():
        with Client([address], deadline_s=30, security=security) as one:
            history.runs[node_id] = [run_record(r) for jid in ids for r in one.list_runs(job_id=jid)]
            if job_prefix is not None:
                history.jobs[node_id] = {j.job_id for j in one.list_jobs(name_prefix=job_prefix)}
    return history


def check_cluster(
    cluster: LocalCluster,
    expected: Expected,
    job_prefix: str | None = None,
    leases: Leases = (),
    job_ids: Iterable[str] = (),
) -> History:
    """Read the history of ``expected``'s jobs (and of ``job_ids``) off every node and check it; returns what was read."""
    expected = dataclasses.replace(expected, nodes=set(expected.nodes) | set(cluster.nodes))
    ids = [j.job_id for j in expected.interval] + [j.job_id for j in expected.one_off] + list(job_ids)
    history = settled(lambda: read_history(cluster, ids, job_prefix, leases))
    check_history(history, expected)
    deleted = applied_entries_deleted(cluster)
    assert not deleted, "a node deleted Raft log entries it had applied:\n" + "\n".join(deleted[:10])
    return history


def applied_entries_deleted(cluster: LocalCluster) -> list[str]:
    """Each line of a node's log that says it deleted entries it had applied (see the module docstring)."""
    found = []
    for node_id, node in sorted(cluster.nodes.items()):
        try:
            with open(node.log_path, encoding="utf-8", errors="replace") as log:
                found += [f"{node_id}: {line.strip()}" for line in log if APPLIED_DELETED in line]
        except FileNotFoundError:
            continue
    return found


def settled(read: Callable[[], History], settle_s: float = SETTLE_S, pause_s: float = 1.0) -> History:
    """``read()``, and again while the nodes' readings disagree and differ from the reading before, for at most
    ``settle_s``: the nodes are read one after another, so a command committed between two of them (a lease
    expiring 30 s after a grant whose answer died with a killed leader) shows as a disagreement that is none. A
    disagreement two readings in a row show alike is the nodes' state at rest: it is returned, and checked."""
    history = read()
    deadline = time.monotonic() + settle_s
    while replica_disagreements(history.runs) and time.monotonic() < deadline:
        time.sleep(pause_s)
        again = read()
        if again.runs == history.runs and again.jobs == history.jobs:
            break
        history = again
    return history


class LeaseWatch:
    """The leases of one queue's runs as one node applies them; use as a context manager."""

    KINDS = ["fired", "leased", "retry_scheduled", "finished"]

    def __init__(self, address: str, queue: str) -> None:
        self.address, self.queue = address, queue
        self._client = Client([address], deadline_s=30)
        self._stream = self._client.watch_runs(queue=queue, include_existing=True, kinds=self.KINDS)
        self._lock = threading.Lock()
        self._leases: list[LeaseRecord] = []
        self._open: dict[str, int] = {}
        self._seen: set[str] = set()
        self._finished: set[str] = set()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._follow, name=f"lease-watch-{queue}", daemon=True)
        self._thread.start()

    def __enter__(self) -> "LeaseWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.cancel()
        self._thread.join(10)
        self._client.close()

    def _follow(self) -> None:
        seq = 0
        try:
            for event in self._stream:
                seq += 1
                self._on(event, seq)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.error = exc
        except BaseException as exc:  # noqa: BLE001 - reported by ``leases``
            self.error = exc

    def _on(self, event: pb.RunEvent, seq: int) -> None:
        run = event.run
        with self._lock:
            self._seen.add(run.run_id)
            if event.kind == "finished":
                self._finished.add(run.run_id)
            if event.kind == "leased" or (event.kind == "existing" and run.status == pb.RUN_STATUS_LEASED):
                # a lease still open for this run stays open: the checker reports the overlap
                self._open[run.run_id] = len(self._leases)
                self._leases.append(LeaseRecord(run.run_id, run.attempt, run.fencing_token, run.executor_id, seq, None))
            elif event.kind in ("retry_scheduled", "finished") and run.run_id in self._open:
                i = self._open.pop(run.run_id)
                self._leases[i] = dataclasses.replace(self._leases[i], end=seq)

    def wait_seen(self, run_count: int = 1, timeout: float = 20) -> None:
        """Wait until the watch has seen ``run_count`` runs of its queue: from then on it misses no change."""
        self._wait(lambda: len(self._seen) >= run_count, timeout, f"{run_count} run(s)")

    def wait_finished(self, run_id: str, timeout: float = 20) -> None:
        """Wait until the watched node has applied the end of ``run_id`` (it may apply later than the node a test asked)."""
        self._wait(lambda: run_id in self._finished, timeout, f"run {run_id} finish")

    def _wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.error is None:
            with self._lock:
                if done():
                    return
            time.sleep(0.05)
        raise AssertionError(f"the lease watch on {self.address} (queue {self.queue!r}) did not see {what}: {self.error!r}")

    def leases(self) -> list[LeaseRecord]:
        """What was seen so far; raises if the watch broke (the history would have a hole)."""
        if self.error is not None:
            raise AssertionError(f"the lease watch on {self.address} (queue {self.queue!r}) broke: {self.error!r}")
        with self._lock:
            return list(self._leases)
