"""A rolling upgrade across a command format bump, on a running cluster that keeps firing.

The newer version is simulated by ``tests.format_bump_node``: the same raftsched, one command format
newer, with one new command (``format_probe``) its nodes try to commit every half second. Upgraded one
node at a time, the cluster keeps its format — and no probe reaches the log — until every member runs the
new version; then the leader switches the format and probes commit. An old node started afterwards meets
the newer entries and stops, naming both formats, instead of applying past them.
"""

from __future__ import annotations

import os
import time

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.cluster.domain.commands import wire as command_registry
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import every_spec, now_ms, wait_for
from tests.history import Expected, IntervalJob
from tests.history_read import check_cluster

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEW = dict(module="tests.format_bump_node", env={"PYTHONPATH": REPO})
OLD_FORMAT = command_registry.FORMAT_VERSION
NEW_FORMAT = OLD_FORMAT + 1


def _formats(c: LocalCluster) -> dict[str, int]:
    return {n: (c.status(n) or pb.ClusterStatus()).command_format for n in c.nodes}


def _logs(c: LocalCluster, needle: str) -> list[str]:
    found = []
    for node in c.nodes.values():
        with open(node.log_path, encoding="utf-8", errors="replace") as f:
            found += [line for line in f if needle in line]
    return found


def test_rolling_upgrade_across_a_command_format_bump(fresh_cluster: LocalCluster) -> None:
    c = fresh_cluster
    wait_for(lambda: set(_formats(c).values()) == {OLD_FORMAT}, 30, f"the cluster on command format {OLD_FORMAT}")
    with Client(c.addresses, deadline_s=30) as client:
        ticks = {j.job_id: cv.ts_ms(j.created_at) for j in (client.create_job(every_spec(f"tick-{i}", 1000)) for i in range(3))}
        for step, node_id in enumerate(sorted(c.nodes), start=1):
            c.terminate(node_id)  # SIGTERM: the graceful stop an upgrade uses
            c.start(node_id, **NEW)
            c.wait_leader()
            wait_for(
                lambda n=node_id: f"(command format {NEW_FORMAT})" in _version_of(c, n),
                30,
                f"{node_id} to report the new version",
            )
            if step < len(c.nodes):  # a member still runs the old version: the cluster stays where it is
                time.sleep(1.5)  # upgraded nodes try their probe every 0.5 s meanwhile
                assert set(_formats(c).values()) == {OLD_FORMAT}, _formats(c)
                assert _logs(c, "format probe committed") == []
                assert _logs(c, f"format probe refused: FormatProbe needs command format {NEW_FORMAT}")
        # every member understands the new format: the leader switches the cluster, and the new command commits
        wait_for(lambda: set(_formats(c).values()) == {NEW_FORMAT}, 30, f"the cluster on command format {NEW_FORMAT}")
        wait_for(lambda: _logs(c, "format probe committed"), 20, "a probe to commit")
        assert _logs(c, "switching the cluster to it") and len(_logs(c, f"command format {NEW_FORMAT}: switching")) == 1

        # an old node meets the newer entries: it stops, naming both formats, and applies nothing past them
        old = "n2"
        c.terminate(old)
        c.start(old)
        proc = c.nodes[old].proc
        assert proc is not None and proc.wait(30) == 76
        with open(c.nodes[old].log_path, encoding="utf-8") as f:
            stop = [line for line in f if "stopping this node" in line]
        assert stop, "the old node did not say why it stopped"
        assert f"command format {NEW_FORMAT}" in stop[-1] and f"understands command formats up to {OLD_FORMAT}" in stop[-1]
        c.wait_leader(among=[n for n in c.nodes if n != old])  # the others go on

        c.start(old, **NEW)  # upgraded after all, it catches up
        c.wait_leader()
        time.sleep(2.0)
        last_restart = now_ms()
        time.sleep(2.5)
        for job_id in ticks:
            client.job("PauseJob", pb.PauseJobRequest(job_id=job_id))

    # every node, through every restart, tells the same history: one run per second of every job, none skipped
    check_cluster(
        c,
        Expected(
            interval=[
                IntervalJob(j, 1000, first_ms=created + 1000, fired_after_ms=last_restart, skips_allowed=False)
                for j, created in ticks.items()
            ]
        ),
    )


def _version_of(c: LocalCluster, node_id: str) -> str:
    status = c.status(node_id)
    return next((m.version for m in status.members if m.id == node_id), "") if status else ""
