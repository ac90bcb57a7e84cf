"""``raftsched cluster ...``: the cluster as its nodes see it.

Subcommands are the entries of ``COMMANDS`` (``raftsched.cluster.app.cli.args.Command``):
add one to add a subcommand (its flags, its handler, an example for --help).
"""

from __future__ import annotations

import argparse
import time

from raftsched.cluster.app.cli.args import Command, CommandFailed, parse_span_ms
from raftsched.cluster.app.cli.output import render_message, table
from raftsched.cluster.domain.unsafe_text import escape
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client
from raftsched.rpc.client.errors import ClusterUnreachable

#: membership changes and backups may take a while (a leadership hand-over, a snapshot of a large state)
ADMIN_TIMEOUT_S = 120.0


def status_text(s: pb.ClusterStatus) -> str:
    http = any(m.http_address for m in s.members)
    rows = [
        [m.id, pb.MemberRole.Name(m.role).removeprefix("MEMBER_ROLE_"), m.raft_address, m.grpc_address,
         "yes" if m.reachable else "no", m.version or "?"] + ([m.http_address or "-"] if http else [])
        for m in s.members
    ]  # fmt: skip
    head = f"leader: {s.leader_id or '(none)'}  term: {s.term}  commit: {s.commit_index}  applied: {s.applied_index}  (answered by {s.self_id})"
    head += f"\ncommand format: {s.command_format or '?'}" + (
        f"  membership change in flight: {s.membership_change}" if s.membership_change else ""
    )
    runs = ", ".join(f"{f.name.replace('_', ' ')} {v}" for f, v in s.runs.ListFields()) or "none"
    counts = f"jobs: {s.jobs}  runs: {runs}"
    if s.pending_by_queue:
        deepest = sorted(s.pending_by_queue.items(), key=lambda kv: (-kv[1], kv[0]))
        more = f", ... {len(deepest) - 10} more" if len(deepest) > 10 else ""
        counts += "\npending by queue: " + ", ".join(f"{escape(q)} {n}" for q, n in deepest[:10]) + more
    headers = ["NODE", "ROLE", "RAFT", "GRPC", "REACHABLE", "VERSION"] + (["HTTP"] if http else [])
    return head + "\n" + counts + "\n" + table(headers, rows)


def status(a: argparse.Namespace, client: Client) -> None:
    s = client.cluster_status()
    print(render_message(a.output, s, lambda: status_text(s), s.leader_id))


def leader(a: argparse.Namespace, client: Client) -> None:
    """The leader's id (as the answering node sees it); with --wait, once a node answers and a leader is
    known and reachable (nodes still starting, after a leader dies, until another is elected). None known is an error (exit 1)."""
    deadline = time.monotonic() + (parse_span_ms(a.wait, "--wait") / 1000 if a.wait else 0)
    while True:
        try:
            s = client.cluster_status()
        except ClusterUnreachable:  # no node answers yet (still starting): --wait waits for one too
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
            continue
        member = next((m for m in s.members if m.id == s.leader_id), None)
        if member is not None and member.reachable:
            break
        if time.monotonic() >= deadline:
            why = "no leader is known" if not s.leader_id else f"its leader {s.leader_id} is not reachable"
            hint = " (an election takes a second or two: --wait 10s waits for one)" if not a.wait else ""
            raise CommandFailed(f"{why} to {s.self_id}{hint}")
        time.sleep(0.2)
    text = s.leader_id if a.output == "table" else f"{s.leader_id}  {member.grpc_address}"
    print(render_message(a.output, member, lambda: text, s.leader_id))


def whoami_text(me: pb.WhoAmIResponse) -> str:
    if not me.tokens_required:
        return "the cluster takes calls without a token (no [auth] tokens_file): anyone who reaches it may call anything"
    limits = "".join(
        f"; {what} {', '.join(values)} only" for what, values in (("queues", me.queues), ("types", me.types)) if values
    )
    return f"token {me.name!r}: roles {', '.join(me.roles) or 'none'}{limits}"


def whoami(a: argparse.Namespace, client: Client) -> None:
    me = client.who_am_i()
    print(render_message(a.output, me, lambda: whoami_text(me), me.name))


def add_node(a: argparse.Namespace, client: Client) -> None:
    req = pb.AddNodeRequest(id=a.id, raft_address=a.raft, grpc_address=a.grpc, http_address=a.http)
    s = client.cluster("AddNode", req, timeout=ADMIN_TIMEOUT_S)
    print(render_message(a.output, s, lambda: status_text(s), s.leader_id))


def remove_node(a: argparse.Namespace, client: Client) -> None:
    s = client.cluster("RemoveNode", pb.RemoveNodeRequest(id=a.id), timeout=ADMIN_TIMEOUT_S)
    print(render_message(a.output, s, lambda: status_text(s), s.leader_id))


def backup(a: argparse.Namespace, client: Client) -> None:
    from raftsched.cluster.app.backup_restore import save_backup

    index, size = save_backup(client.backup(ADMIN_TIMEOUT_S), a.file)
    print(f"backup of the state at index {index} ({size} bytes) written to {a.file}")


def _add_node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--id", required=True, help="the new member's node id")
    p.add_argument("--raft", required=True, help="host:port of its Raft endpoint")
    p.add_argument("--grpc", required=True, help="host:port of its gRPC endpoint")
    p.add_argument("--http", default="", help="host:port of its HTTP endpoint (optional)")


def _remove_node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--id", required=True, help="the member's node id")


def _backup_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="where to write the backup (written beside as FILE.part, then renamed)")


def _leader_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", metavar="SPAN", help="wait up to SPAN (e.g. 10s) for a reachable leader")


COMMANDS = [
    Command(
        "status",
        "who leads, who is reachable, jobs and runs by status",
        "raftsched cluster status\nraftsched cluster status -o json",
        status,
    ),
    Command(
        "leader",
        "the leader's node id (for scripts)",
        "LEADER=$(raftsched cluster leader)\nraftsched cluster leader --wait 10s   # after a leader died: the next one",
        leader,
        _leader_args,
    ),
    Command(
        "whoami",
        "whose token this command line calls with: its name, roles and limits",
        "raftsched cluster whoami\nraftsched cluster whoami --token-file worker.token -o json",
        whoami,
    ),
    Command(
        "add-node",
        "add a member (admin; then start it with raftsched node --join)",
        "raftsched cluster add-node --id n4 --raft 10.0.0.4:7001 --grpc 10.0.0.4:50051 --http 10.0.0.4:8081\n"
        "raftsched node --config cluster.toml --node-id n4 --join 10.0.0.1:50051,10.0.0.2:50051",
        add_node,
        _add_node_args,
    ),
    Command(
        "remove-node",
        "remove a member, the leader included (admin; it hands leadership over first)",
        "raftsched cluster remove-node --id n1",
        remove_node,
        _remove_node_args,
    ),
    Command(
        "backup",
        "write a consistent copy of the state (a snapshot at a committed index) to FILE (admin)",
        "raftsched cluster backup raftsched-$(date +%F).backup\n"
        "raftsched node restore raftsched-2026-11-26.backup --config cluster.toml --node-id n1   # into a new cluster",
        backup,
        _backup_args,
    ),
]
