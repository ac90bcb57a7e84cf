"""The node's state machine as Raft replicates it: the job state machine with its LMDB environment, durable.

``raftsched.raft.adapter.StateMachine`` wants one object that applies and commits
entries, pins a copy of the state for a snapshot, installs one, converts a
format-2 blob, and says when the store is nearly full. The job state machine
(``raftsched.cluster.fsm.machine``, pure) does the first and last-but-one; its store
(``raftsched.storage.lmdb_state``) the file work. This wires the two; after an install,
and after an entry the disk refused (``rollback``), the machine rereads its
small state and rebuilds its in-memory indexes.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Callable

from raftsched.cluster.domain.errors import NewerState
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.config import ClusterConfig, ConfigError
from raftsched.storage.lmdb_state import EnvCopy, LmdbTableStore, StateFileError

STATE_FILE = "state.mdb"


class DurableMachine:
    """``raftsched.raft.adapter.StateMachine`` over the job state machine and the store it writes."""

    def __init__(self, machine: JobStateMachine, store: LmdbTableStore, restored: Callable[[], None]) -> None:
        self.machine = machine
        self.store = store
        self._restored = restored  # told after an install or a restore replaced the state

    @property
    def committed_index(self) -> int:
        return self.machine.committed_index

    def apply(self, data: bytes, index: int, pos: int) -> Any:
        return self.machine.apply(data, index, pos)

    def commit(self) -> None:
        self.machine.commit()

    def rollback(self) -> None:
        """The entry being applied could not be stored: drop its writes and reread the machine's small state and
        in-memory indexes from what the store holds (``raftsched.raft.adapter`` applies the entry again later)."""
        self.store.abort()
        self.machine.load()

    def open_copy(self) -> EnvCopy:
        return self.store.open_copy()

    def install(self, source: BinaryIO, size: int) -> None:
        self.store.install(source, size)
        self.machine.load()
        self._restored()

    def restore(self, data: bytes) -> None:
        self.machine.restore(data)
        self._restored()

    def has_room(self) -> bool:
        return self.store.has_room()

    def full_message(self) -> str:
        return self.store.full_message()


def open_state(cfg: ClusterConfig, node_dir: str) -> tuple[JobStateMachine, LmdbTableStore]:
    """The node's store and the machine on it (``ConfigError`` naming the file for one it cannot use)."""
    path = os.path.join(node_dir, STATE_FILE)
    try:
        store = LmdbTableStore(path, cfg.state.max_bytes)
    except StateFileError as exc:
        raise ConfigError(str(exc)) from exc
    try:
        return JobStateMachine(store), store
    except NewerState:
        store.close()
        raise
    except ValueError as exc:
        store.close()
        raise ConfigError(f"cannot use the state file {path}: {exc}") from exc
