"""``Client``: every JobService and ClusterService call, with keyword arguments and plain objects.

``Client()`` finds the cluster, TLS and token as the command line does
(``raftsched.sdk.connection``); ``Client("h:p,h:p", token=..., ca_file=...)``
names them. Each call goes to any node and is retried on another when one
cannot answer (``raftsched.rpc.client.client.Client`` underneath: request ids
make a retried write apply once). Answers are ``raftsched.sdk.objects``;
failures are ``raftsched.sdk.errors`` (``NotFound``, ``InvalidArgument``, ...).
``list_jobs`` and ``list_runs`` are iterators that fetch the next page as
they go; ``watch_runs`` follows run changes across node failures;
``wait_run`` returns once a run has ended. A ``Client`` is safe to share
between threads; close it (or use ``with``) when done.
"""

from __future__ import annotations

import time
from typing import IO, Any, Iterable, Iterator, Mapping, Sequence

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client as RpcClient
from raftsched.rpc.client.watch import RunFollower
from raftsched.sdk import from_pb
from raftsched.sdk import requests as rq
from raftsched.sdk.connection import Connection
from raftsched.sdk.errors import RaftschedError, Timeout, from_item_status, translated
from raftsched.sdk.objects import (
    Backfill,
    ClusterStatus,
    Explanation,
    Identity,
    Job,
    Run,
    RunEvent,
    RunOutput,
    ScheduledInstant,
)
from raftsched.sdk.spec import change_spec


class RunWatch:
    """An iterator of ``RunEvent``s that follows the cluster's run changes across node failures; ``close()``
    (from any thread) ends it."""

    def __init__(self, follower: RunFollower) -> None:
        self._follower = follower
        self._events = iter(follower)

    def __iter__(self) -> "RunWatch":
        return self

    def __next__(self) -> RunEvent:
        with translated():
            return from_pb.run_event(next(self._events))

    def close(self) -> None:
        """Stop watching: the stream is cancelled and the iteration ends."""
        self._follower.cancel()

    def __enter__(self) -> "RunWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """A client of a raftsched cluster (see the module)."""

    def __init__(
        self,
        cluster: str | Sequence[str] | None = None,
        *,
        config: str | None = None,
        token: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        insecure: bool = False,
        timeout: float = 15.0,
    ) -> None:
        """Connect to ``cluster`` (``"host:port,host:port"`` or a list), else to the cluster the command line
        would find (``config``, ``$RAFTSCHED_CLUSTER``, ``$RAFTSCHED_CONFIG``, ``local-cluster/client.toml``,
        ...). ``token``/``token_file``, ``ca_file``, ``cert_file``/``key_file`` as the CLI's flags;
        ``timeout``: how long one call may take, retries on other nodes included."""
        target = Connection(cluster, config, token, token_file, ca_file, cert_file, key_file, insecure).resolve()
        with translated():
            self._rpc = RpcClient(target.addresses, deadline_s=timeout, security=target.security, connect_timeout_s=2.0)
        self._rpc.source = target.source
        #: the nodes' gRPC addresses this client calls
        self.addresses: list[str] = list(target.addresses)

    def close(self) -> None:
        """Close the connections to the nodes."""
        self._rpc.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _job(self, method: str, request: Any) -> Any:
        with translated():
            return self._rpc.job(method, request)

    def _cluster(self, method: str, request: Any) -> Any:
        with translated():
            return self._rpc.cluster(method, request)

    # ---------------------------------------------------------------- jobs

    def create_job(self, name: str, *, idempotency_key: str = "", request_id: str = "", **spec: Any) -> Job:
        """Create a job. The schedule: exactly one of ``every=`` (a span: ``timedelta``, seconds, ``"10s"``,
        ``"1h30m"``), ``cron=`` (with ``tz=``, an IANA zone; default UTC), ``at=`` (an aware datetime or ISO
        text) or ``after=`` (a span). ``type`` (default ``"noop"``), ``queue`` (default ``"default"``),
        ``payload`` (bytes or text as they are, anything else as JSON), ``max_attempts``, ``backoff`` (the first
        retry's delay, or a dict of ``initial``, ``max``, ``multiplier``, ``jitter``), and any other JobSpec
        field by its name (``timeout="5m"``, ``concurrency="forbid"``, ...; an unknown name is a ``TypeError``).
        The same ``idempotency_key`` with the same spec returns the first job (another spec: ``AlreadyExists``)."""
        return from_pb.job(self._job("CreateJob", rq.create_job(name, idempotency_key, request_id, **spec)))

    def create_jobs(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job | RaftschedError]:
        """Create up to 1000 jobs in one call, each a mapping of ``create_job``'s arguments (``name``
        included); per job, in order, the ``Job`` or the error that refused it (nothing is raised for one)."""
        resp = self._job("CreateJobs", rq.create_jobs(list(jobs)))
        return [from_pb.job(r.job) if r.status.code == 0 else from_item_status(r.status) for r in resp.results]

    def get_job(self, job_id: str) -> Job:
        """The job ``job_id`` (deleted ones too); ``NotFound`` when there is none."""
        return from_pb.job(self._job("GetJob", pb.GetJobRequest(job_id=job_id)))

    def list_jobs(
        self,
        *,
        queue: str = "",
        status: str | None = None,
        name_prefix: str = "",
        page_size: int = rq.PAGE_SIZE,
        label_selector: str = "",
    ) -> Iterator[Job]:
        """Every job matching the filters (``status``: ``"ACTIVE"``, ``"PAUSED"``, ...; ``label_selector``:
        ``"team=billing,!beta"``), by id; the pages are fetched as the iteration goes."""
        token = ""
        while True:
            resp = self._job("ListJobs", rq.list_jobs(queue, status, name_prefix, page_size, token, label_selector))
            yield from (from_pb.job(j) for j in resp.jobs)
            token = resp.next_page_token
            if not token:
                return

    def find_jobs(self, name: str, *, include_deleted: bool = False) -> list[Job]:
        """The jobs named exactly ``name`` (names need not be unique), oldest first; deleted ones only with
        ``include_deleted``."""
        found = [j for j in self.list_jobs(name_prefix=name) if j.name == name and (include_deleted or j.status != "DELETED")]
        return sorted(found, key=lambda j: (j.created_at is None, j.created_at, j.id))

    def update_job(self, job_id: str, *, request_id: str = "", **changes: Any) -> Job:
        """Change a job: only what is given changes (``create_job``'s arguments: a new schedule, ``tz=``
        alone for a cron job's zone, ``payload=``, ``timeout=``...). A schedule change restarts it from now."""
        current = self._job("GetJob", pb.GetJobRequest(job_id=job_id))
        spec = change_spec(current.spec, **changes)
        return from_pb.job(self._job("UpdateJob", pb.UpdateJobRequest(job_id=job_id, spec=spec, request_id=request_id)))

    def pause_job(self, job_id: str, *, note: str = "", until: Any = None, request_id: str = "") -> Job:
        """Stop a job firing until ``resume_job`` (or until ``until``, an aware datetime or ISO text, when it
        resumes itself); ``note``: why, shown with the job. Instants passed meanwhile are not fired."""
        return from_pb.job(self._job("PauseJob", rq.pause_job(job_id, request_id, note, until)))

    def resume_job(self, job_id: str, *, request_id: str = "") -> Job:
        """Let a paused job fire again, from now."""
        return from_pb.job(self._job("ResumeJob", pb.ResumeJobRequest(job_id=job_id, request_id=request_id)))

    def delete_job(self, job_id: str, *, request_id: str = "") -> Job:
        """Delete a job (softly: status ``DELETED``, still readable); its pending runs are cancelled."""
        return from_pb.job(self._job("DeleteJob", pb.DeleteJobRequest(job_id=job_id, request_id=request_id)))

    def trigger_job(self, job_id: str, *, payload: Any = None, request_id: str = "") -> Run:
        """One extra run of the job, now; the run. ``payload``: this run's own instead of the job's (bytes and text
        as they are, anything else as JSON)."""
        return from_pb.run(self._job("TriggerJob", rq.trigger_job(job_id, request_id, payload)))

    def backfill_job(self, job_id: str, *, start: Any, end: Any, dry_run: bool = False) -> Backfill:
        """A run for each instant of the job's schedule in ``[start, end)`` (aware datetimes or ISO text) that the
        job has passed with no run (a skipped instant has none), at most 10,000; ``dry_run``: the instants only.
        Safe to retry: a retry makes only the runs still missing."""
        return from_pb.backfill(self._job("BackfillJob", rq.backfill_job(job_id, start, end, dry_run)))

    def preview_schedule(self, *, count: int = 10, start: Any = None, **schedule: Any) -> list[ScheduledInstant]:
        """The next ``count`` instants a schedule would fire at, after ``start`` (default now), without saving
        anything: the schedule as ``create_job`` takes it (``cron="30 2 * * *", tz="Europe/Berlin"``, ...)."""
        return from_pb.preview(self._job("PreviewSchedule", rq.preview(count, start, schedule)))

    # ---------------------------------------------------------------- runs

    def get_run(self, run_id: str) -> Run:
        """The run ``run_id``; ``NotFound`` when there is none (or retention dropped it)."""
        return from_pb.run(self._job("GetRun", pb.GetRunRequest(run_id=run_id)))

    def list_runs(
        self, *, job_id: str = "", status: str | None = None, page_size: int = rq.PAGE_SIZE, label_selector: str = ""
    ) -> Iterator[Run]:
        """Every run matching the filters (``status``: ``"FAILED"``, ``"DEAD_LETTER"``, ...; ``label_selector``:
        its job's labels), newest first; the pages are fetched as the iteration goes."""
        token = ""
        while True:
            resp = self._job("ListRuns", rq.list_runs(job_id, status, page_size, token, label_selector))
            yield from (from_pb.run(r) for r in resp.runs)
            token = resp.next_page_token
            if not token:
                return

    def cancel_run(self, run_id: str, *, request_id: str = "") -> Run:
        """Cancel a run: a pending one at once; a running one is asked to stop at its next renewal."""
        return from_pb.run(self._job("CancelRun", pb.CancelRunRequest(run_id=run_id, request_id=request_id)))

    def retry_run(self, run_id: str, *, request_id: str = "") -> Run:
        """Run a ``DEAD_LETTER``, ``FAILED`` or ``CANCELLED`` run again, with a fresh attempt budget."""
        return from_pb.run(self._job("RetryRun", pb.RetryRunRequest(run_id=run_id, request_id=request_id)))

    def explain_run(self, run_id: str) -> Explanation:
        """Why a run exists and what happened to it, step by step."""
        return from_pb.explanation(self._job("ExplainRun", pb.ExplainRunRequest(run_id=run_id)))

    def get_run_output(self, run_id: str, *, attempt: int = 0, offset: int = 0) -> RunOutput:
        """An attempt's log and result (``attempt`` 0: the latest), the log from byte ``offset`` on."""
        req = pb.GetRunOutputRequest(run_id=run_id, attempt=attempt, offset=offset)
        return from_pb.run_output(self._job("GetRunOutput", req))

    def wait_run(self, run_id: str, timeout: float | None = 60.0) -> Run:
        """Return the run once it has ended (``SUCCEEDED``, ``FAILED``, ``DEAD_LETTER``, ``CANCELLED``, ...),
        polling with backoff; ``Timeout`` naming the run and its last status after ``timeout`` seconds (None:
        wait as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = rq.POLL_FIRST_S
        while True:
            run = self.get_run(run_id)
            if run.terminal:
                return run
            if deadline is not None and time.monotonic() + pause > deadline:
                raise Timeout(_still(run, timeout), run.id, run.status)
            time.sleep(pause)
            pause = min(pause * 1.5, rq.POLL_MAX_S)

    def watch_runs(
        self, *, job_id: str = "", queue: str = "", kinds: list[str] | None = None, include_existing: bool = False
    ) -> RunWatch:
        """An iterator of run changes (``RunEvent``: ``fired``, ``leased``, ``finished``, ...) of a job or a
        queue (or all), live, following the cluster across node failures; ``include_existing`` first sends the
        runs that have not ended. End it with ``close()`` (or ``with``)."""
        follower = RunFollower(self._rpc, include_existing=include_existing, **rq.watch(job_id, queue, kinds))
        return RunWatch(follower)

    # ---------------------------------------------------------------- the cluster

    def cluster_status(self) -> ClusterStatus:
        """The cluster as the answering node sees it: leader, members, term, indexes, run counts."""
        return from_pb.cluster_status(self._cluster("GetClusterStatus", pb.GetClusterStatusRequest()))

    def whoami(self) -> Identity:
        """Whose token this client calls with: its name, roles and limits, as the cluster knows it (any token may
        ask)."""
        return from_pb.identity(self._cluster("WhoAmI", pb.WhoAmIRequest()))

    def add_node(self, node_id: str, raft_address: str, grpc_address: str, http_address: str = "") -> ClusterStatus:
        """Add a member (admin); answers once the change is committed. Then start the node with ``--join``."""
        return from_pb.cluster_status(self._cluster("AddNode", rq.add_node(node_id, raft_address, grpc_address, http_address)))

    def remove_node(self, node_id: str) -> ClusterStatus:
        """Remove a member (admin), the leader included (it hands leadership over first)."""
        return from_pb.cluster_status(self._cluster("RemoveNode", pb.RemoveNodeRequest(id=node_id)))

    def backup(self, dest: str | IO[bytes]) -> int:
        """Write a consistent copy of the cluster's state (admin) to ``dest`` (a path or a binary file); the
        Raft index it covers. ``raftsched node restore`` seeds a new cluster from it."""
        if isinstance(dest, str):
            with open(dest, "wb") as f:
                return self.backup(f)
        index = 0
        with translated():
            for chunk in self._rpc.backup():
                index = index or chunk.index
                dest.write(chunk.data)
        return index


def _still(run: Run, timeout: float | None) -> str:
    return f"run {run.id} has not ended after {timeout:g} s: it is {run.status} (attempt {run.attempt})"
