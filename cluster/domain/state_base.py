"""The records and indexes of the job state machine, and the run bookkeeping every rule shares.

``StateBase`` is the data half of ``cluster.domain.state.JobStateMachine``:
the jobs, runs and idempotency keys, the indexes derived from them, and the
few helpers that keep the indexes right when a run is created, activated or
finished. The rules (jobs and firing in ``state``, leases in
``lease_rules``, retention in ``retention_rules``) build on it; the two
hooks below are theirs.

Pure: no I/O, no clock, no threads. Readers on other threads hold the
caller's lock (see ``cluster.node.replicated_state``).
"""

from __future__ import annotations

from sortedcontainers import SortedDict, SortedList

from cluster.domain.keylist import KeyList
from cluster.domain.model import Job, JobStatus, Member, MemberChange, Run, RunStatus

#: (kind, run) pairs describing what an apply changed, for WatchRuns (``cluster.node.event_hub``) and
#: the metrics; ``lease_expired`` (an ExpireLeases entry expired the run's lease: its retry or end
#: follows as its own event) is for the metrics only
RunEvent = tuple[str, Run]


class StateBase:
    """All jobs and runs, and the indexes the leader and the API read."""

    def __init__(self) -> None:
        self.now_ms = 0
        self.applied_index = 0
        self.jobs: SortedDict = SortedDict()  # job_id -> Job
        self.runs: SortedDict = SortedDict()  # run_id -> Run
        #: idempotency key -> (job_id, fingerprint of the spec it was created with)
        self.idempotency: dict[str, tuple[str, str]] = {}
        #: node id -> (raftsched version, command format) as each node last reported it (``NodeInfo``)
        self.members: dict[str, tuple[str, int]] = {}
        #: node id -> Raft address each node reported with its ``NodeInfo`` (for the format switch)
        self.member_rafts: dict[str, str] = {}
        #: the cluster's members, their ids and addresses; the change in flight; members removed
        #: (``cluster.domain.membership_rules``)
        self.roster: dict[str, Member] = {}
        self.member_change: MemberChange | None = None
        self.removed_members: dict[str, Member] = {}
        #: the command format the cluster uses (``SetClusterFormat``); 1 for a state from before formats
        self.cluster_format = 1
        self._reset_indexes()
        self.events: list[RunEvent] = []
        #: the entry being applied and how many fencing tokens it handed out so far (not state:
        #: an entry is applied whole, never split by a snapshot)
        self._token_entry = 0
        self._tokens_used = 0
        self._pos = 0

    def _reset_indexes(self) -> None:
        self.due: SortedList = SortedList()  # (next_fire_ms, job_id) of ACTIVE jobs
        self.runs_by_job: dict[str, KeyList] = {}  # job_id -> (scheduled_ms, run_id)
        self.active_by_job: dict[str, set[str]] = {}  # job_id -> PENDING/LEASED run ids
        self.pending: dict[str, SortedList] = {}  # queue -> (not_before_ms, run_id)
        #: (queue, job type) -> the same keys as ``pending``, split by the type of each run's job (what a
        #: grant to an executor that serves some types reads; the key tuples are shared with ``pending``)
        self.pending_by_type: dict[tuple[str, str], SortedList] = {}
        self.leases: dict[str, str] = {}  # lease_id -> run_id of LEASED runs
        self.lease_deadlines: SortedList = SortedList()  # (lease_expires_ms, lease_id)
        self.expiry: SortedList = SortedList()  # (finished_ms + history_ttl_ms, run_id) of finished runs
        self.finished_count: dict[str, int] = {}  # job_id -> finished runs kept
        self.purge: SortedList = SortedList()  # (when, job_id) of DELETED jobs
        #: how many of ``runs`` are in each status (kept as runs change: read by GetClusterStatus)
        self.run_counts: dict[RunStatus, int] = dict.fromkeys(RunStatus, 0)
        #: how many of ``jobs`` are in each status (kept as jobs change: read by the metrics)
        self.job_counts: dict[JobStatus, int] = dict.fromkeys(JobStatus, 0)

    def _new_run(self, job: Job, run_id: str, scheduled_ms: int, manual: bool = False) -> Run:
        run = Run(run_id, job.job_id, job.spec.queue, scheduled_ms, self.now_ms, manual=manual)
        self.runs[run_id] = run
        self.run_counts[RunStatus.PENDING] += 1
        self._job_runs(job.job_id).add((scheduled_ms, run_id))
        self._activate(run)
        self.events.append(("fired", run))
        return run

    def _job_runs(self, job_id: str) -> KeyList:
        runs = self.runs_by_job.get(job_id)
        if runs is None:
            runs = self.runs_by_job[job_id] = KeyList()
        return runs

    def _activate(self, run: Run) -> None:
        active = self.active_by_job.get(run.job_id)
        if active is None:
            active = self.active_by_job[run.job_id] = set()
        active.add(run.run_id)
        if run.status is RunStatus.PENDING:
            self._index_pending(run)
        elif run.status is RunStatus.LEASED:
            self.leases[run.lease_id] = run.run_id
            self.lease_deadlines.add((run.lease_expires_ms, run.lease_id))

    def _deactivate(self, run: Run) -> None:
        active = self.active_by_job.get(run.job_id)
        if active is not None:
            active.discard(run.run_id)
            if not active:
                del self.active_by_job[run.job_id]
        if run.status is RunStatus.PENDING:
            self._unindex_pending(run)
        elif run.status is RunStatus.LEASED:
            self._release(run)

    def _run_type(self, run: Run) -> str:
        """The type a run executes as: its job's (current) type."""
        job = self.jobs.get(run.job_id)
        return job.spec.type if job is not None else ""

    def _index_pending(self, run: Run) -> None:
        key = (run.not_before_ms, run.run_id)
        queue = self.pending.get(run.queue)
        if queue is None:
            queue = self.pending[run.queue] = SortedList()
        queue.add(key)
        typed_key = (run.queue, self._run_type(run))
        typed = self.pending_by_type.get(typed_key)
        if typed is None:
            typed = self.pending_by_type[typed_key] = SortedList()
        typed.add(key)

    def _unindex_pending(self, run: Run) -> None:
        """Undo ``_index_pending`` (call it while the run's job still has the type it was indexed under)."""
        key = (run.not_before_ms, run.run_id)
        queue = self.pending.get(run.queue)
        if queue is not None:
            queue.discard(key)
        typed_key = (run.queue, self._run_type(run))
        typed = self.pending_by_type.get(typed_key)
        if typed is not None:
            typed.discard(key)
            if not typed:
                del self.pending_by_type[typed_key]

    def _finish(self, run: Run, status: RunStatus, error: str = "") -> None:
        self._deactivate(run)
        self._set_status(run, status)
        run.finished_ms = self.now_ms
        if error:
            run.error = error
        self.events.append(("finished", run))
        self._retain(run)

    def _set_job_status(self, job: Job, status: JobStatus) -> None:
        """Every change of a kept job's status goes through here (``job_counts`` follows it)."""
        counts = self.job_counts
        counts[job.status] -= 1
        counts[status] += 1
        job.status = status

    def _set_status(self, run: Run, status: RunStatus) -> None:
        counts = self.run_counts
        counts[run.status] -= 1
        counts[status] += 1
        run.status = status

    # ------------------------------------------------------------ hooks of the rules

    def _release(self, run: Run) -> None:
        """A LEASED run leaves the lease indexes (``LeaseRules``)."""
        raise NotImplementedError

    def _retain(self, run: Run) -> None:
        """A run just finished: keep it within its job's history limits (``RetentionRules``)."""
        raise NotImplementedError
