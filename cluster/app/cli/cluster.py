"""``raftsched cluster ...``: the cluster as its nodes see it.

Subcommands are the entries of ``COMMANDS`` (``cluster.app.cli.args.Command``):
add one to add a subcommand (its flags, its handler, an example for --help).
"""

from __future__ import annotations

import argparse
import time

from cluster.app.cli.args import Command, CommandFailed, parse_span_ms
from cluster.app.cli.output import render_message, table
from protos.raftsched.v1 import scheduler_pb2 as pb
from rpc.client.client import Client


def status_text(s: pb.ClusterStatus) -> str:
    rows = [
        [m.id, pb.MemberRole.Name(m.role).removeprefix("MEMBER_ROLE_"), m.raft_address, m.grpc_address,
         "yes" if m.reachable else "no", m.version or "?"]
        for m in s.members
    ]  # fmt: skip
    head = f"leader: {s.leader_id or '(none)'}  term: {s.term}  commit: {s.commit_index}  applied: {s.applied_index}  (answered by {s.self_id})"
    runs = ", ".join(f"{f.name.replace('_', ' ')} {v}" for f, v in s.runs.ListFields()) or "none"
    counts = f"jobs: {s.jobs}  runs: {runs}"
    if s.pending_by_queue:
        deepest = sorted(s.pending_by_queue.items(), key=lambda kv: (-kv[1], kv[0]))
        more = f", ... {len(deepest) - 10} more" if len(deepest) > 10 else ""
        counts += "\npending by queue: " + ", ".join(f"{q} {n}" for q, n in deepest[:10]) + more
    return head + "\n" + counts + "\n" + table(["NODE", "ROLE", "RAFT", "GRPC", "REACHABLE", "VERSION"], rows)


def status(a: argparse.Namespace, client: Client) -> None:
    s = client.cluster_status()
    print(render_message(a.output, s, lambda: status_text(s), s.leader_id))


def leader(a: argparse.Namespace, client: Client) -> None:
    """The leader's id (as the answering node sees it); with --wait, once a leader is known and
    reachable (after a leader dies, until another is elected). None known is an error (exit 1)."""
    deadline = time.monotonic() + (parse_span_ms(a.wait, "--wait") / 1000 if a.wait else 0)
    while True:
        s = client.cluster_status()
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
]
