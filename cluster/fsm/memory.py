"""What the machine keeps in memory: its small state, and the live indexes of its PENDING and LEASED runs.

Everything that grows with the backlog lives in the store (``tx``); this is
what is small and must be fast:

* the small state, written to ``meta`` by every commit (``meta_values``)
  and read back by ``load`` (``read_meta``): ``now``, the applied index,
  the counts of jobs and runs by status, the membership and the cluster's
  command format;
* the live indexes, rebuilt from the store's active runs by ``load``:
  PENDING runs per (queue, job type) — a queue's runs of every type are
  the merge of its types' lists (``QueueKeys``), not a second copy that
  every fire and grant would keep too — live leases and their deadlines
  (``runs`` keeps them as runs change).

Read by other threads only under the node's lock
(``raftsched.cluster.node.replica``).
"""

from __future__ import annotations

from heapq import merge
from typing import Any, Callable, Iterator

from sortedcontainers import SortedList

from raftsched.cluster.domain.model import JobStatus, Member, MemberChange, RunStatus
from raftsched.cluster.fsm import layout

#: the layout of the tables (``keys`` and ``layout``); a store with a newer one is refused
LAYOUT = 1
META_KEYS = (b"layout", b"applied", b"now", b"counts", b"membership")
#: the statuses in the order ``meta``'s counts are stored (an enum's iteration costs ~2 us on every entry)
_RUN_STATUSES = tuple(RunStatus)
_JOB_STATUSES = tuple(JobStatus)


def drop(keys: SortedList, key: Any) -> None:
    """Remove ``key`` from ``keys`` if it is there. The head is looked at first: a grant takes its runs from the
    heads of their indexes, oldest first, and a completion most often ends the oldest lease; deleting the head
    costs half of ``discard``'s two searches (which it falls back on)."""
    if keys and keys[0] == key:
        del keys[0]
    else:
        keys.discard(key)


class QueueKeys:
    """A queue's PENDING keys ``(not_before_ms, run_id)`` of priority 0, of every job type, in order: a read-only
    merge of the queue's lists in ``Memory.pending_by_type`` (keys are unique, so the merge is the one sorted list
    a single index would hold)."""

    __slots__ = ("_lists",)

    def __init__(self, lists: list[SortedList]) -> None:
        self._lists = lists

    def __len__(self) -> int:
        return sum(map(len, self._lists))

    def __bool__(self) -> bool:
        return any(self._lists)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        lists = self._lists
        return iter(lists[0]) if len(lists) == 1 else merge(*lists)

    def __getitem__(self, i: int) -> tuple[int, str]:
        """The ``i``-th key (0: the oldest, read from the lists' heads without a merge)."""
        if i == 0:
            heads = [keys[0] for keys in self._lists if keys]
            if heads:
                return min(heads)
            raise IndexError("no PENDING runs in this queue")
        return list(self)[i]

    def irange(self, maximum: tuple[int, str], inclusive: tuple[bool, bool]) -> Iterator[tuple[int, str]]:
        """``SortedList.irange`` of every list, merged: the keys up to ``maximum``, oldest first, read lazily."""
        lists = self._lists
        if len(lists) == 1:
            return lists[0].irange(maximum=maximum, inclusive=inclusive)
        return merge(*(keys.irange(maximum=maximum, inclusive=inclusive) for keys in lists))


class Memory:
    """The machine's in-memory state (see the module docstring)."""

    def __init__(self) -> None:
        #: the greatest ``now`` any command carried
        self.now_ms = 0
        self.applied_index = 0
        #: the applied index the store holds (entries at or below it are skipped)
        self.committed_index = 0
        #: node id -> (raftsched version, command format) as each node last reported it (``NodeInfo``)
        self.members: dict[str, tuple[str, int]] = {}
        #: node id -> Raft address each node reported with its ``NodeInfo`` (for the format switch)
        self.member_rafts: dict[str, str] = {}
        #: the cluster's members, their ids and addresses; the change in flight; members removed (``membership``)
        self.roster: dict[str, Member] = {}
        self.member_change: MemberChange | None = None
        self.removed_members: dict[str, Member] = {}
        #: the command format the cluster uses (``SetClusterFormat``); 1 for a state from before formats
        self.cluster_format = 1
        #: (queue, job type) -> (not_before_ms, run_id) of PENDING runs of priority 0, by the type of each run's job
        #: (a grant to an executor that serves some types reads its types' lists; one that serves any type reads
        #: the merge of its queues' lists: ``queue_keys``); queue -> job type -> the same lists (``runs`` keeps both
        #: as lists are made and emptied)
        self.pending_by_type: dict[tuple[str, str], SortedList] = {}
        self.queue_types: dict[str, dict[str, SortedList]] = {}
        #: PENDING runs of a job with a priority above 0 (command format 5), kept apart from ``pending`` (which holds
        #: those of priority 0, most runs) with the same keys: (queue, priority) -> keys; (queue, type, priority) ->
        #: keys; run_id -> its priority as indexed
        self.prio_pending: dict[tuple[str, int], SortedList] = {}
        self.prio_by_type: dict[tuple[str, str, int], SortedList] = {}
        self.run_prio: dict[str, int] = {}
        #: LEASED runs of jobs with a concurrency key: key -> how many; lease_id -> its key as counted
        self.conc_leased: dict[str, int] = {}
        self.lease_conc: dict[str, str] = {}
        #: PENDING runs of jobs with a concurrency key: run_id -> (key, limit) as indexed (a grant checks them)
        self.keyed_pending: dict[str, tuple[str, int]] = {}
        #: run_id -> when a PENDING run of a job with a ``pending_ttl`` expires, and (that deadline, run_id) in order
        self.pending_ttl: dict[str, int] = {}
        self.pending_deadlines: SortedList = SortedList()
        #: run_id -> the ``RANKED`` key of an active run whose record is kept there (command format 6; ``tx``: an ended
        #: one's is read from its row)
        self.placed: dict[str, bytes] = {}
        #: lease_id -> run_id of LEASED runs, and (lease_expires_ms, lease_id) in deadline order
        self.leases: dict[str, str] = {}
        self.lease_deadlines: SortedList = SortedList()
        #: how many runs (jobs) are in each status (kept as they change: GetClusterStatus, the metrics)
        self.run_counts: dict[RunStatus, int] = dict.fromkeys(RunStatus, 0)
        self.job_counts: dict[JobStatus, int] = dict.fromkeys(JobStatus, 0)
        #: the membership as last encoded, and its bytes (``_membership_raw``)
        self._membership_memo: tuple[Any, ...] | None = None

    def queue_keys(self, queue: str) -> QueueKeys | None:
        """The PENDING keys of priority 0 of ``queue``, of every type (None: it has none)."""
        types = self.queue_types.get(queue)
        return QueueKeys(list(types.values())) if types else None

    @property
    def pending(self) -> dict[str, QueueKeys]:
        """queue -> its PENDING keys of priority 0 (``queue_keys``), for every queue that has any."""
        return {queue: QueueKeys(list(types.values())) for queue, types in self.queue_types.items() if types}

    def read_meta(self, get: Callable[[bytes], bytes | None]) -> None:
        """The small state from ``meta``'s values. Raises ValueError for a newer layout."""
        layout_version = layout.decode_int(get(b"layout"), LAYOUT)
        if layout_version > LAYOUT:
            raise ValueError(f"the state has layout {layout_version}, newer than this node reads ({LAYOUT}): upgrade this node")
        self.applied_index = self.committed_index = layout.decode_int(get(b"applied"))
        self.now_ms = layout.decode_int(get(b"now"))
        counts = get(b"counts")
        if counts is not None:
            runs, jobs = layout.decode_plain(counts)
            # a state written before a status was added counts none of it
            self.run_counts = dict.fromkeys(RunStatus, 0) | dict(zip(RunStatus, runs))
            self.job_counts = dict.fromkeys(JobStatus, 0) | dict(zip(JobStatus, jobs))
        membership = get(b"membership")
        if membership is not None:
            self.set_membership(*layout.decode_membership(membership))

    def meta_values(self) -> dict[bytes, bytes]:
        """The small state as ``meta``'s values."""
        run_counts, job_counts = self.run_counts, self.job_counts
        counts = (tuple([run_counts[s] for s in _RUN_STATUSES]), tuple([job_counts[s] for s in _JOB_STATUSES]))
        return {
            b"layout": layout.encode_int(LAYOUT),
            b"applied": layout.encode_int(self.applied_index),
            b"now": layout.encode_int(self.now_ms),
            b"counts": layout.encode_plain(counts),
            b"membership": self._membership_raw(),
        }

    def _membership_raw(self) -> bytes:
        """The membership's bytes in ``meta``: encoded again only when it changed since the last entry (it rarely
        does, and every entry is committed with it). Compared by value: never stale."""
        now = (self.members, self.member_rafts, self.roster, self.member_change, self.removed_members, self.cluster_format)
        memo = self._membership_memo
        if memo is not None and memo[:6] == now:
            raw: bytes = memo[6]
            return raw
        raw = layout.encode_membership(*now)
        members, rafts, roster, change, removed, cluster_format = now  # copies: the dicts change in place
        self._membership_memo = (dict(members), dict(rafts), dict(roster), change, dict(removed), cluster_format, raw)
        return raw

    def membership(self) -> layout.Membership:
        return layout.Membership(
            list(self.roster.values()), self.member_change, list(self.removed_members.values()), self.cluster_format,
            dict(self.member_rafts),
        )  # fmt: skip

    def set_membership(self, members: layout.Members, m: layout.Membership) -> None:
        self.members = members
        self.roster = {x.node_id: x for x in m.roster}
        self.member_change, self.cluster_format = m.change, m.cluster_format
        self.removed_members = {x.node_id: x for x in m.removed}
        self.member_rafts = dict(m.rafts)
