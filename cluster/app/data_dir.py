"""A node's data dir identity (the ``NODE`` file) and the membership a node starts with.

``NODE`` (JSON, ``0600``, replaced atomically and fsynced) says whose the
data dir is:

* ``node_id``: the node it belongs to: any other ``--node-id`` is refused;
* ``members``: the Raft addresses of the config's ``[[nodes]]`` when the dir
  was made (the first membership; the key older versions wrote and read);
* ``membership``: the members as the cluster's log last said, each
  ``[id, raft, grpc, http]``, recorded by the node whenever a change
  finished (``raftsched.cluster.node.membership.keeper``). A restart starts Raft with
  these peers, not the config's: ``[[nodes]]`` is only the first membership;
* ``removed``: why the node was removed from its cluster: such a data dir is
  refused for good (its node must not come back with this data);
* ``restored``: the backup the dir was seeded from (``raftsched node restore``).

A config whose ``[[nodes]]`` shares no Raft address with any membership the
data dir knows is another cluster's: refused. A config that lists the
current members (or the first ones) is this cluster's, whichever it lists.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace

from raftsched.cluster.domain.model import Member
from raftsched.cluster.node.config import ClusterConfig, ConfigError, NodeAddress
from raftsched.storage.disk.durable_files import FILE_MODE, fsync_dir

IDENTITY_FILE = "NODE"


@dataclass(frozen=True)
class Identity:
    node_id: str
    #: Raft addresses of the config's [[nodes]] when the dir was made (empty: unknown)
    seed: tuple[str, ...] = ()
    #: the membership the log last gave (empty: none recorded yet)
    membership: tuple[Member, ...] = ()
    removed: str = ""
    restored: str = ""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"node_id": self.node_id, "members": list(self.seed)}
        if self.membership:
            out["membership"] = [list(m) for m in self.membership]
        for key in ("removed", "restored"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out


def identity_path(node_dir: str) -> str:
    return os.path.join(node_dir, IDENTITY_FILE)


def read_identity(node_dir: str) -> Identity | None:
    path = identity_path(node_dir)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        membership = tuple(Member(*(str(x) for x in m)) for m in raw.get("membership", []))
        return Identity(
            str(raw.get("node_id")),
            tuple(str(a) for a in raw.get("members") or ()),
            membership,
            str(raw.get("removed", "")),
            str(raw.get("restored", "")),
        )
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path} is unreadable ({exc}); this data dir may be damaged or foreign") from exc


def write_identity(node_dir: str, ident: Identity) -> None:
    path = identity_path(node_dir)
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(ident.to_json(), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    fsync_dir(node_dir)


def check_existing(ident: Identity, node_dir: str, node_id: str, cfg: ClusterConfig) -> None:
    """``ConfigError`` for a data dir that is another node's, a removed member's, or another cluster's."""
    if ident.node_id != node_id:
        raise ConfigError(f"data dir {node_dir} belongs to node {ident.node_id!r}, not {node_id!r}: check --node-id and data_dir")
    if ident.removed:
        raise ConfigError(
            f"data dir {node_dir} belongs to node {node_id}, which was removed from its cluster ({ident.removed}); "
            "a removed member must not come back with its old data. To run a node here again, move this data dir "
            f"away, add the node as a new member (raftsched cluster add-node --id {node_id} ...) and start it with --join"
        )
    configured = {n.raft for n in cfg.nodes}
    known = [k for k in (set(ident.seed), {m.raft for m in ident.membership}) if k]
    if known and not any(configured & k for k in known):
        listed = sorted(set().union(*known))
        raise ConfigError(
            f"data dir {node_dir} belongs to a cluster of {', '.join(listed)}, but {cfg.path} lists "
            f"{', '.join(sorted(configured))}: this is another cluster's data (or the config changed): "
            "use that cluster's config, or move the data dir away"
        )


def ensure_identity(node_dir: str, node_id: str, cfg: ClusterConfig, membership: tuple[Member, ...] = ()) -> Identity:
    """The data dir's identity (checked), or a new one for a new dir; ``membership``: what a joining node
    was told (recorded at once, so a restart finds its peers without asking again)."""
    ident = read_identity(node_dir)
    if ident is not None:
        check_existing(ident, node_dir, node_id, cfg)
        if membership and not ident.membership:
            ident = replace(ident, membership=membership)
            write_identity(node_dir, ident)
        return ident
    if any(f.startswith("raft.") for f in os.listdir(node_dir)):
        raise ConfigError(f"data dir {node_dir} holds Raft files but no {IDENTITY_FILE} file: it is not ours; move it away")
    ident = Identity(node_id, tuple(sorted(n.raft for n in cfg.nodes)), membership)
    write_identity(node_dir, ident)
    return ident


def record_membership(node_dir: str, members: tuple[Member, ...]) -> None:
    """What the log says the members are now (read at the next start)."""
    ident = read_identity(node_dir)
    if ident is not None and ident.membership != members:
        write_identity(node_dir, replace(ident, membership=members))


def mark_removed(node_dir: str, reason: str) -> None:
    """This node was removed: its data dir is refused from now on."""
    ident = read_identity(node_dir)
    if ident is not None:
        write_identity(node_dir, replace(ident, removed=reason))


def effective_nodes(cfg: ClusterConfig, members: tuple[Member, ...]) -> tuple[NodeAddress, ...]:
    """The members as ``NodeAddress``es: addresses from the membership, listen addresses from the config's
    ``[[nodes]]`` entry of the same id (when it lists one with the same advertised address)."""
    out = []
    for m in members:
        listed = next((n for n in cfg.nodes if n.id == m.node_id), None)
        if listed is not None and (listed.raft, listed.grpc) == (m.raft, m.grpc):
            out.append(replace(listed, http=m.http or listed.http, http_listen=listed.http_listen or m.http))
        else:
            out.append(NodeAddress(m.node_id, m.raft, m.grpc, m.http))
    return tuple(out)


def seed_members(cfg: ClusterConfig) -> tuple[Member, ...]:
    """The first membership: the config's ``[[nodes]]``."""
    return tuple(Member(n.id, n.raft, n.grpc, n.http) for n in cfg.nodes)
