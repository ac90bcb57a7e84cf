"""Where a replica listens, whom it talks to, its files and its timers; the one place they become a ``SyncObjConf``.

``RaftSettings`` is filled by the node's composition root (``raftsched.cluster.app.node_main``) from ``[raft]``;
``build_conf`` maps it onto pysyncobj's ``SyncObjConf`` (and installs the pysyncobj patches, which such a conf
relies on). Re-exported by ``raftsched.raft.adapter``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pysyncobj import SyncObjConf
from pysyncobj.journal import Journal

from raftsched.raft import pysyncobj_patches
from raftsched.raft.lmdb_journal import MAP_SIZE


@dataclass(frozen=True)
class RaftSettings:
    """Where this replica listens and whom it talks to, and its tuning."""

    self_address: str
    peer_addresses: tuple[str, ...]
    #: where the Raft port listens (``host:port``); None = ``self_address``, never every interface
    listen_address: str | None = None
    #: the Raft log: an LMDB environment directory (``raft.lmdb``); None keeps it in memory only
    journal_file: str | None = None
    #: fsync the log, term and vote before anything depends on them (survives power loss); False only
    #: hands them to the OS (survives SIGKILL)
    journal_fsync: bool = True
    #: the log's LMDB map size: the most the log may hold
    journal_map_size: int = MAP_SIZE
    dump_file: str | None = None
    #: snapshot writers given the same lock file write one at a time (``raftsched.raft.snapshot_turns``); None: no turns
    snapshot_turn_lock: str | None = None
    password: str | None = None
    #: raft timers (seconds); pysyncobj's defaults are too slow or too twitchy here
    append_entries_period: float = 0.01
    auto_tick_period: float = 0.005
    raft_min_timeout: float = 0.8
    raft_max_timeout: float = 1.6
    leader_fallback_timeout: float = 2.0
    connection_retry_time: float = 0.5
    connection_timeout: float = 3.5
    log_compaction_min_entries: int = 200_000
    log_compaction_min_time: float = 600.0
    #: the most weight one entry's batch of proposals may carry (``raftsched.raft.batching``; None: no bound)
    max_batch_weight: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


Serializer = Callable[[str, Any], None]
Deserializer = Callable[[str], Any]


def build_conf(
    s: RaftSettings,
    on_state_changed: Callable[[int, int], None] | None,
    serializer: Serializer | None,
    deserializer: Deserializer | None,
    journal: Journal | None = None,
    checker: Callable[[], int] | None = None,
) -> SyncObjConf:
    """The one place raftsched settings become a ``SyncObjConf``.

    ``journal`` (an open ``LmdbJournal``) rides in ``journalFile``: our
    ``createJournal`` hook hands it to pysyncobj as it is. Installs the
    pysyncobj patches, which such a conf relies on.
    """
    pysyncobj_patches.install()
    kwargs: dict[str, Any] = dict(
        password=s.password,
        bindAddress=_bind_address(s.listen_address or s.self_address),
        autoTickPeriod=s.auto_tick_period,
        appendEntriesPeriod=s.append_entries_period,
        raftMinTimeout=s.raft_min_timeout,
        raftMaxTimeout=s.raft_max_timeout,
        leaderFallbackTimeout=s.leader_fallback_timeout,
        connectionRetryTime=s.connection_retry_time,
        connectionTimeout=max(s.connection_timeout, s.raft_max_timeout),
        commandsWaitLeader=False,
        dynamicMembershipChange=True,
        logCompactionMinEntries=s.log_compaction_min_entries,
        logCompactionMinTime=s.log_compaction_min_time,
        journalFile=journal if journal is not None else s.journal_file,
        fullDumpFile=s.dump_file,
        onStateChanged=on_state_changed,
        appendEntriesBatchSizeBytes=2**18,
        sendBufferSize=2**20,
        recvBufferSize=2**20,
        serializer=serializer,
        deserializer=deserializer,
        serializeChecker=checker,
    )
    kwargs.update(s.extra)
    return SyncObjConf(**kwargs)


def _bind_address(address: str) -> str:
    """``host:port`` as pysyncobj's server wants it: an IPv6 host without brackets."""
    host, port = address.rsplit(":", 1)
    return f"{host.strip('[]')}:{port}"
