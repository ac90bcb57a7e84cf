"""The queue and job type of what a call names by id: the facts a restricted token is checked against.

Used by the gRPC auth layer (``raftsched.rpc.server.auth.ScopeLookup``) only for tokens
limited to some queues or types, on calls that name a job, run or lease by id.
Each answer is one read after a read barrier, so it sees every write the
cluster acknowledged before the call; an unknown id is None (or left out),
and the call itself then answers NOT_FOUND or FAILED_PRECONDITION.
"""

from __future__ import annotations

from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.fsm.reader import RecordReader
from raftsched.cluster.node.replica import Replica


class ScopeReader:
    def __init__(self, replica: Replica) -> None:
        self._replica = replica

    def job(self, job_id: str) -> tuple[str, str] | None:
        def scope(r: RecordReader) -> tuple[str, str] | None:
            job = r.job(job_id)
            return None if job is None else (job.spec.queue, job.spec.type)

        return self._replica.read_records(scope)

    def run(self, run_id: str) -> tuple[str, str] | None:
        def scope(r: RecordReader) -> tuple[str, str] | None:
            run = r.run(run_id)
            if run is None:
                return None
            job = r.job(run.job_id)
            return run.queue, "" if job is None else job.spec.type

        return self._replica.read_records(scope)

    def lease_queues(self, lease_ids: list[str]) -> list[str]:
        def queues(m: JobStateMachine) -> list[str]:
            runs = (m.view.run(run_id) for run_id in (m.leases.get(lease_id) for lease_id in lease_ids) if run_id is not None)
            return sorted({run.queue for run in runs if run is not None})

        return self._replica.read(queues)
