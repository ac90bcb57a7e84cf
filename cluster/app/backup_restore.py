"""``raftsched cluster backup FILE`` and ``raftsched node restore FILE``.

A backup is a node's Raft snapshot file as it wrote it (``raftsched.raft.snapshot_file``:
the ``RSCHSNAP`` marker, metadata naming the Raft index it covers, then a
copy of the node's state environment at that index and its checksum), taken
at or after a committed index (``raftsched.cluster.node.backup``) and streamed over the
admin ``Backup`` RPC. ``save_backup`` writes it to ``FILE.part``, checks it
(header and body checksum) as a node would before loading it, and renames it
onto ``FILE``: a backup on disk is always whole.

``restore_data_dir`` seeds one node's empty data dir of a **new** cluster
from it: the state environment (``state.mdb``: jobs, runs, idempotency keys;
fencing tokens and run ids keep counting from the backup's index) and a
snapshot of it, without the old cluster's members and versions — the new cluster's membership is its config's ``[[nodes]]``, which
its first leader records. Restore every node of the new cluster from the same
file before starting any: a node started empty beside restored ones could win
an election with another empty one and lead from an empty log.
The snapshot's two boundary entries are given term 1, so the new cluster's
terms start above them and every restored node's log is alike. A backup of a
version that kept its state in memory (a format-2 snapshot) is converted.
"""

from __future__ import annotations

import os
from typing import Iterable

from raftsched.cluster.app.data_dir import Identity, write_identity
from raftsched.cluster.app.durable_machine import open_state
from raftsched.cluster.node.config import ClusterConfig, ConfigError
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.raft.snapshot_file import SnapshotError, SnapshotFile, check_body, open_body, read_snapshot, write_snapshot_file
from raftsched.storage.disk.durable_files import FILE_MODE, fsync_dir, make_private_dir

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
            if snap.state is None:
                check_body(part, snap)
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
        if snap.state is None:
            check_body(backup, snap)
    except SnapshotError as exc:
        raise ConfigError(f"cannot restore from {backup}: {exc}") from exc
    make_private_dir(node_dir)
    (last_cmd, last_idx, _), (prev_cmd, prev_idx, _) = snap.entries
    raft_data = ((last_cmd, last_idx, RESTORED_TERM), (prev_cmd, prev_idx, RESTORED_TERM), [n.raft for n in cfg.nodes])
    _seed_state(backup, snap, cfg, node_dir, raft_data)
    seed = tuple(sorted(n.raft for n in cfg.nodes))
    write_identity(node_dir, Identity(node_id, seed, restored=f"{os.path.abspath(backup)} (index {snap.index})"))
    fsync_dir(node_dir)
    return node_dir, snap.index


def _seed_state(backup: str, snap: SnapshotFile, cfg: ClusterConfig, node_dir: str, raft_data: object) -> None:
    """The node's state environment from the backup, without the old membership, and a snapshot of it."""
    machine, store = open_state(cfg, node_dir)
    try:
        try:
            if snap.state is not None:
                machine.restore(snap.state)
            else:
                with open_body(backup, snap) as body:
                    store.install(body, snap.body_size)
                machine.load()
        except ValueError as exc:
            raise ConfigError(f"cannot restore from {backup}: {exc}") from exc
        machine.forget_membership()
        machine.commit()
        copy = store.open_copy()
        try:
            write_snapshot_file(os.path.join(node_dir, "raft.snapshot"), raft_data, copy.write_to)
        finally:
            copy.close()
    finally:
        store.close()
