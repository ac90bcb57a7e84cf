"""``raftsched cluster backup FILE`` and ``raftsched node restore FILE``.

A backup is a node's Raft snapshot file as it wrote it (``raft.snapshot_file``:
the ``RSCHSNAP`` marker, metadata naming the Raft index it covers, the state
and its checksum), taken at or after a committed index (``cluster.node.backup``)
and streamed over the admin ``Backup`` RPC. ``save_backup`` writes it to
``FILE.part``, checks it as a node would before loading it, and renames it
onto ``FILE``: a backup on disk is always whole.

``restore_data_dir`` seeds one node's empty data dir of a **new** cluster
from it: the state (jobs, runs, idempotency keys, fencing tokens and run ids
keep counting from the backup's index), without the old cluster's members and
versions — the new cluster's membership is its config's ``[[nodes]]``, which
its first leader records. Restore every node of the new cluster from the same
file before starting any: a node started empty beside restored ones could win
an election with another empty one and lead from an empty log.
The snapshot's two boundary entries are given term 1, so the new cluster's
terms start above them and every restored node's log is alike.
"""

from __future__ import annotations

import os
from typing import Iterable

from cluster.app.data_dir import Identity, write_identity
from cluster.domain.state import JobStateMachine
from cluster.node.config import ClusterConfig, ConfigError
from protos.raftsched.v1 import scheduler_pb2 as pb
from raft.durable_files import FILE_MODE, fsync_dir, make_private_dir
from raft.snapshot_file import SnapshotError, read_snapshot, write_snapshot

#: the term given to the restored snapshot's boundary entries (a new cluster's first term is above it)
RESTORED_TERM = 1


def save_backup(chunks: Iterable[pb.BackupChunk], path: str) -> tuple[int, int]:
    """Write the streamed snapshot to ``path`` (checked, then renamed into place); ``(index, bytes)``."""
    part = path + ".part"
    size = 0
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        with open(fd, "wb") as f:
            expected = None
            for chunk in chunks:
                if expected is None:
                    expected = chunk.size
                f.write(chunk.data)
                size += len(chunk.data)
            f.flush()
            os.fsync(f.fileno())
        if expected is None or size != expected:
            raise ConfigError(f"the backup stream ended after {size} of {expected} bytes; nothing was written to {path}: retry")
        try:
            snap = read_snapshot(part)
        except SnapshotError as exc:
            raise ConfigError(
                f"the backup received is not a whole snapshot ({exc}); nothing was written to {path}: retry"
            ) from exc
        os.replace(part, path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    finally:
        if os.path.exists(part):
            os.unlink(part)
    return snap.index, size


def restore_data_dir(backup: str, cfg: ClusterConfig, node_id: str) -> tuple[str, int]:
    """Seed ``node_id``'s empty data dir from ``backup``; ``(node dir, index)``. ``ConfigError`` saying what is wrong."""
    cfg.node(node_id)  # an id the config lists
    node_dir = cfg.node_dir(node_id)
    if os.path.isdir(node_dir) and os.listdir(node_dir):
        raise ConfigError(
            f"data dir {node_dir} is not empty: a restore seeds a node of a new cluster only; move it away "
            "(or give the new cluster another data_dir)"
        )
    try:
        snap = read_snapshot(backup)
    except SnapshotError as exc:
        raise ConfigError(f"cannot restore from {backup}: {exc}") from exc
    machine = JobStateMachine()
    try:
        machine.restore(snap.state)
    except ValueError as exc:
        raise ConfigError(f"cannot restore from {backup}: {exc}") from exc
    machine.roster, machine.member_change, machine.removed_members = {}, None, {}
    machine.members, machine.member_rafts = {}, {}
    (last_cmd, last_idx, _), (prev_cmd, prev_idx, _) = snap.entries
    raft_data = ((last_cmd, last_idx, RESTORED_TERM), (prev_cmd, prev_idx, RESTORED_TERM), [n.raft for n in cfg.nodes])
    make_private_dir(node_dir)
    seed = tuple(sorted(n.raft for n in cfg.nodes))
    write_identity(node_dir, Identity(node_id, seed, restored=f"{os.path.abspath(backup)} (index {snap.index})"))
    write_snapshot(os.path.join(node_dir, "raft.snapshot"), raft_data, machine.snapshot())
    fsync_dir(node_dir)
    return node_dir, snap.index
