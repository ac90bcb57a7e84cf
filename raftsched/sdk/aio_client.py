"""``AsyncClient``: ``Client``'s methods as coroutines, over ``grpc.aio``.

The same arguments, answers and errors as ``raftsched.sdk.client.Client``
(the requests are built by the same code, ``raftsched.sdk.requests``);
``list_jobs``, ``list_runs`` and ``watch_runs`` are async iterators (``async
for``), every other method a coroutine. The calls go to any node and move on
to the next one when one cannot answer (``raftsched.rpc.client.aio``). Use it
from one event loop; close it with ``await client.close()`` or ``async with``.
"""

from __future__ import annotations

import asyncio
import time
from typing import IO, Any, AsyncIterator, Iterable, Mapping, Sequence

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.aio import AioClient, AioRunFollower
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


class AsyncRunWatch:
    """An async iterator of ``RunEvent``s across node failures; ``close()`` ends it."""

    def __init__(self, follower: AioRunFollower) -> None:
        self._follower = follower
        self._events = follower.__aiter__()

    def __aiter__(self) -> "AsyncRunWatch":
        return self

    async def __anext__(self) -> RunEvent:
        with translated():
            return from_pb.run_event(await self._events.__anext__())

    def close(self) -> None:
        """Stop watching: the stream is cancelled and the iteration ends."""
        self._follower.cancel()

    async def __aenter__(self) -> "AsyncRunWatch":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """A client of a raftsched cluster for asyncio programs (see the module)."""

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
        """The cluster found as ``Client`` finds it (the same arguments); nothing is dialled until a call."""
        target = Connection(cluster, config, token, token_file, ca_file, cert_file, key_file, insecure).resolve()
        with translated():
            self._rpc = AioClient(target.addresses, deadline_s=timeout, security=target.security, connect_timeout_s=2.0)
        self._rpc.source = target.source
        #: the nodes' gRPC addresses this client calls
        self.addresses: list[str] = list(target.addresses)

    async def close(self) -> None:
        """Close the connections to the nodes."""
        await self._rpc.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _job(self, method: str, request: Any) -> Any:
        with translated():
            return await self._rpc.call("job", method, request)

    async def _cluster(self, method: str, request: Any) -> Any:
        with translated():
            return await self._rpc.call("cluster", method, request)

    # ---------------------------------------------------------------- jobs

    async def create_job(self, name: str, *, idempotency_key: str = "", request_id: str = "", **spec: Any) -> Job:
        """Create a job: the arguments of ``Client.create_job``."""
        return from_pb.job(await self._job("CreateJob", rq.create_job(name, idempotency_key, request_id, **spec)))

    async def create_jobs(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job | RaftschedError]:
        """Create up to 1000 jobs in one call; per job the ``Job`` or the error that refused it."""
        resp = await self._job("CreateJobs", rq.create_jobs(list(jobs)))
        return [from_pb.job(r.job) if r.status.code == 0 else from_item_status(r.status) for r in resp.results]

    async def get_job(self, job_id: str) -> Job:
        """The job ``job_id`` (deleted ones too); ``NotFound`` when there is none."""
        return from_pb.job(await self._job("GetJob", pb.GetJobRequest(job_id=job_id)))

    async def list_jobs(
        self,
        *,
        queue: str = "",
        status: str | None = None,
        name_prefix: str = "",
        page_size: int = rq.PAGE_SIZE,
        label_selector: str = "",
    ) -> AsyncIterator[Job]:
        """Every job matching the filters, by id; pages fetched as the iteration goes (``async for``)."""
        token = ""
        while True:
            resp = await self._job("ListJobs", rq.list_jobs(queue, status, name_prefix, page_size, token, label_selector))
            for j in resp.jobs:
                yield from_pb.job(j)
            token = resp.next_page_token
            if not token:
                return

    async def find_jobs(self, name: str, *, include_deleted: bool = False) -> list[Job]:
        """The jobs named exactly ``name``, oldest first; deleted ones only with ``include_deleted``."""
        found = [
            j async for j in self.list_jobs(name_prefix=name) if j.name == name and (include_deleted or j.status != "DELETED")
        ]
        return sorted(found, key=lambda j: (j.created_at is None, j.created_at, j.id))

    async def update_job(self, job_id: str, *, request_id: str = "", **changes: Any) -> Job:
        """Change what is given of a job (``Client.update_job``)."""
        current = await self._job("GetJob", pb.GetJobRequest(job_id=job_id))
        spec = change_spec(current.spec, **changes)
        return from_pb.job(await self._job("UpdateJob", pb.UpdateJobRequest(job_id=job_id, spec=spec, request_id=request_id)))

    async def pause_job(self, job_id: str, *, note: str = "", until: Any = None, request_id: str = "") -> Job:
        """Stop a job firing until ``resume_job`` or ``until`` (``Client.pause_job``)."""
        return from_pb.job(await self._job("PauseJob", rq.pause_job(job_id, request_id, note, until)))

    async def resume_job(self, job_id: str, *, request_id: str = "") -> Job:
        """Let a paused job fire again, from now."""
        return from_pb.job(await self._job("ResumeJob", pb.ResumeJobRequest(job_id=job_id, request_id=request_id)))

    async def delete_job(self, job_id: str, *, request_id: str = "") -> Job:
        """Delete a job (softly: status ``DELETED``, still readable)."""
        return from_pb.job(await self._job("DeleteJob", pb.DeleteJobRequest(job_id=job_id, request_id=request_id)))

    async def trigger_job(self, job_id: str, *, payload: Any = None, request_id: str = "") -> Run:
        """One extra run of the job, now; the run. ``payload``: this run's own instead of the job's (bytes and text
        as they are, anything else as JSON)."""
        return from_pb.run(await self._job("TriggerJob", rq.trigger_job(job_id, request_id, payload)))

    async def backfill_job(self, job_id: str, *, start: Any, end: Any, dry_run: bool = False) -> Backfill:
        """A run for each instant of the job's schedule in ``[start, end)`` (aware datetimes or ISO text) that the
        job has passed with no run (a skipped instant has none), at most 10,000; ``dry_run``: the instants only.
        Safe to retry: a retry makes only the runs still missing."""
        return from_pb.backfill(await self._job("BackfillJob", rq.backfill_job(job_id, start, end, dry_run)))

    async def preview_schedule(self, *, count: int = 10, start: Any = None, **schedule: Any) -> list[ScheduledInstant]:
        """The next instants a schedule would fire at, saving nothing (``Client.preview_schedule``)."""
        return from_pb.preview(await self._job("PreviewSchedule", rq.preview(count, start, schedule)))

    # ---------------------------------------------------------------- runs

    async def get_run(self, run_id: str) -> Run:
        """The run ``run_id``; ``NotFound`` when there is none."""
        return from_pb.run(await self._job("GetRun", pb.GetRunRequest(run_id=run_id)))

    async def list_runs(
        self, *, job_id: str = "", status: str | None = None, page_size: int = rq.PAGE_SIZE, label_selector: str = ""
    ) -> AsyncIterator[Run]:
        """Every run matching the filters, newest first; pages fetched as the iteration goes (``async for``)."""
        token = ""
        while True:
            resp = await self._job("ListRuns", rq.list_runs(job_id, status, page_size, token, label_selector))
            for r in resp.runs:
                yield from_pb.run(r)
            token = resp.next_page_token
            if not token:
                return

    async def cancel_run(self, run_id: str, *, request_id: str = "") -> Run:
        """Cancel a run (a running one stops at its next renewal)."""
        return from_pb.run(await self._job("CancelRun", pb.CancelRunRequest(run_id=run_id, request_id=request_id)))

    async def retry_run(self, run_id: str, *, request_id: str = "") -> Run:
        """Run a ``DEAD_LETTER``, ``FAILED`` or ``CANCELLED`` run again, with a fresh attempt budget."""
        return from_pb.run(await self._job("RetryRun", pb.RetryRunRequest(run_id=run_id, request_id=request_id)))

    async def explain_run(self, run_id: str) -> Explanation:
        """Why a run exists and what happened to it, step by step."""
        return from_pb.explanation(await self._job("ExplainRun", pb.ExplainRunRequest(run_id=run_id)))

    async def get_run_output(self, run_id: str, *, attempt: int = 0, offset: int = 0) -> RunOutput:
        """An attempt's log and result (``attempt`` 0: the latest)."""
        req = pb.GetRunOutputRequest(run_id=run_id, attempt=attempt, offset=offset)
        return from_pb.run_output(await self._job("GetRunOutput", req))

    async def wait_run(self, run_id: str, timeout: float | None = 60.0) -> Run:
        """Return the run once it has ended, polling with backoff; ``Timeout`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = rq.POLL_FIRST_S
        while True:
            run = await self.get_run(run_id)
            if run.terminal:
                return run
            if deadline is not None and time.monotonic() + pause > deadline:
                raise Timeout(
                    f"run {run.id} has not ended after {timeout:g} s: it is {run.status} (attempt {run.attempt})",
                    run.id,
                    run.status,
                )
            await asyncio.sleep(pause)
            pause = min(pause * 1.5, rq.POLL_MAX_S)

    def watch_runs(
        self, *, job_id: str = "", queue: str = "", kinds: list[str] | None = None, include_existing: bool = False
    ) -> AsyncRunWatch:
        """An async iterator of run changes across node failures (``Client.watch_runs``); ``close()`` ends it."""
        return AsyncRunWatch(AioRunFollower(self._rpc, include_existing=include_existing, **rq.watch(job_id, queue, kinds)))

    # ---------------------------------------------------------------- the cluster

    async def cluster_status(self) -> ClusterStatus:
        """The cluster as the answering node sees it."""
        return from_pb.cluster_status(await self._cluster("GetClusterStatus", pb.GetClusterStatusRequest()))

    async def whoami(self) -> Identity:
        """Whose token this client calls with: its name, roles and limits."""
        return from_pb.identity(await self._cluster("WhoAmI", pb.WhoAmIRequest()))

    async def add_node(self, node_id: str, raft_address: str, grpc_address: str, http_address: str = "") -> ClusterStatus:
        """Add a member (admin); answers once the change is committed."""
        req = rq.add_node(node_id, raft_address, grpc_address, http_address)
        return from_pb.cluster_status(await self._cluster("AddNode", req))

    async def remove_node(self, node_id: str) -> ClusterStatus:
        """Remove a member (admin)."""
        return from_pb.cluster_status(await self._cluster("RemoveNode", pb.RemoveNodeRequest(id=node_id)))

    async def backup(self, dest: str | IO[bytes]) -> int:
        """Write a consistent copy of the state (admin) to ``dest``; the Raft index it covers."""
        if isinstance(dest, str):
            with open(dest, "wb") as f:
                return await self.backup(f)
        index = 0
        with translated():
            async for chunk in self._rpc.stream("cluster", "Backup", pb.BackupRequest(), timeout=120.0):
                index = index or chunk.index
                dest.write(chunk.data)
        return index
