"""docs/deploy.md, performed: three machines with TLS, tokens and a Raft secret, then a dead one replaced.

Test hosts in network namespaces of this run's own (``tests.netns``) on one switch with real addresses:
10.213.0.1-3 (the nodes), .4 (the replacement, plugged in when it is bought) and .100 (the operator's
machine). Nothing leaves this machine, and parallel runs do not meet. The guide's steps, in its order
(``tests.deployment``): ``scripts/deploy/cluster_files.sh`` makes the CA, a certificate naming each
node's address, the Raft secret, the tokens and ``cluster.toml``; each machine gets its bundle; the nodes
run the ``ExecStart=`` of ``raftsched-node@.service`` (TLS and tokens on, bound to their addresses), an
executor on a node machine runs that of ``raftsched-executor@.service``; the operator creates an every-1-s
job with the ``ops`` token; ``/healthz`` and ``/metrics`` answer over HTTPS. Then the leader's machine
dies (SIGKILL, and its cable pulled) and is replaced as "Replace a dead machine" says: ``remove-node``,
``cluster_files.sh add``, the ``add-node`` it prints, the new node started by its unit with ``--join``.
The job keeps firing; a backup is taken. The shared history checker reads every member of the final
cluster: every instant fired exactly once across the whole sequence (no gap, no double fire, none
skipped), and every acknowledged job is on the new member. Last, every process stops on SIGTERM with
status 0 within its unit's ``TimeoutStopSec``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Iterator

import pytest
from google.protobuf import json_format
from prometheus_client.parser import text_string_to_metric_families

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from tests.deployment import Deployment
from tests.helpers import now_ms, wait_for
from tests.history import Expected, IntervalJob, check_history
from tests.netns import NetnsUnavailable, Network, unique_tag
from tests.remote_history import load
from tests.systemd_units import UNIT_DIR, read_unit, seconds

pytestmark = pytest.mark.fault

NODES = {"n1": "10.213.0.1", "n2": "10.213.0.2", "n3": "10.213.0.3"}
NEW_ID, NEW_ADDRESS = "n4", "10.213.0.4"
OPS_ADDRESS = "10.213.0.100"
GRPC_PORT, HTTP_PORT = 50051, 8081
PREFIX = "deploy-"
#: what /etc/raftsched/executor-default.env says on the executor's machine
EXECUTOR_ARGS = "--queue default --concurrency 2 --allow-type shell"
#: the every-second job: a shell command, so its output goes through the [logs] dir
TICK = json.dumps({"command": "echo tick $RAFTSCHED_RUN_ID"})
NODE_UNIT, EXECUTOR_UNIT = "raftsched-node@.service", "raftsched-executor@.service"


def grpc_of(address: str) -> str:
    return f"{address}:{GRPC_PORT}"


@pytest.fixture()
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    try:
        if shutil.which("curl") is None:
            raise NetnsUnavailable("no curl (the guide's health probes)")
        net = Network(unique_tag("rsd"))
    except NetnsUnavailable as exc:
        if os.environ.get("CI") == "true":  # CI runs as root with curl (scripts/install_system_packages.sh)
            pytest.fail(f"cannot set up the test hosts: {exc}")
        pytest.skip(f"cannot set up the test hosts here ({exc}): it needs root, iproute2 and curl")
    d = Deployment(tmp_path, net, net.add_host("ops", OPS_ADDRESS))
    try:
        for node_id, address in NODES.items():
            net.add_host(node_id, address)
        yield d
    finally:
        d.stop_all()
        for log in sorted(tmp_path.glob("*.log")):
            print(f"----- {log.name} (last lines) -----\n" + "".join(log.read_text(errors="replace").splitlines(True)[-25:]))
        net.close()


def health(d: Deployment, address: str) -> str | None:
    """The leader a node's /healthz names when it answers 200 (a leader and a quorum), else None."""
    code, body = d.https_get(f"{address}:{HTTP_PORT}", "/healthz")
    found = re.match(r"ok: leader (\S+?),", body)
    return found.group(1) if code == 200 and found else None


def agreed_leader(d: Deployment, nodes: dict[str, str]) -> str | None:
    """The leader every node of ``nodes`` names on /healthz, if they all answer 200 and agree."""
    seen = {health(d, a) for a in nodes.values()}
    (leader,) = seen if len(seen) == 1 else (None,)
    return leader if leader in nodes else None


def create(d: Deployment, *args: str) -> pb.Job:
    out = d.ops("job", "create", "--json", *args).stdout
    return json_format.Parse(out, pb.Job(), ignore_unknown_fields=True)


def runs(d: Deployment, job_id: str) -> list[pb.Run]:
    out = d.ops("run", "list", "--job", job_id, "--json").stdout
    return list(json_format.Parse(out, pb.ListRunsResponse(), ignore_unknown_fields=True).runs)


def succeeded_after(d: Deployment, job_id: str, after_ms: int, count: int) -> list[pb.Run]:
    done = [r for r in runs(d, job_id) if r.status == pb.RUN_STATUS_SUCCEEDED and cv.ts_ms(r.scheduled_time) > after_ms]
    return done if len(done) >= count else []


def leaders_by_metrics(d: Deployment, addresses: list[str]) -> float:
    """Σ raftsched_is_leader over the nodes' /metrics (what Prometheus' scrape config in the guide reads)."""
    total = 0.0
    for address in addresses:
        code, body = d.https_get(f"{address}:{HTTP_PORT}", "/metrics")
        assert code == 200, f"/metrics on {address}: {code} {body[:200]}"
        for family in text_string_to_metric_families(body + "\n"):
            if family.name == "raftsched_is_leader":
                total += sum(s.value for s in family.samples)
    return total


def status(d: Deployment, *args: str) -> pb.ClusterStatus:
    out = d.ops("cluster", "status", "--json", *args).stdout
    return json_format.Parse(out, pb.ClusterStatus(), ignore_unknown_fields=True)


def start_cluster(d: Deployment) -> str:
    """Guide steps 1-4: the files, each machine's bundle, the node units; returns the leader."""
    d.make_files(NODES)
    for node_id in NODES:
        d.install(node_id)
    for node_id in NODES:
        d.start_node(node_id)
    d.cluster = [grpc_of(a) for a in NODES.values()]
    return wait_for(lambda: agreed_leader(d, NODES), 90, "the three nodes to agree on a leader (/healthz)", interval=0.5)


def replace(d: Deployment, dead: str, survivors: dict[str, str]) -> int:
    """ "Replace a dead machine", step by step; returns when the new member has caught up (ms)."""
    before = status(d)
    assert before.leader_id in survivors
    assert [m.reachable for m in before.members if m.id == dead] == [False], before
    d.ops("cluster", "remove-node", "--id", dead)
    said = d.add_machine(NEW_ID, NEW_ADDRESS, [grpc_of(a) for a in survivors.values()])
    add_node = shlex.split(said.strip().splitlines()[-1])  # the command the script says to run
    assert add_node[:3] == ["raftsched", "cluster", "add-node"], said
    d.net.add_host(NEW_ID, NEW_ADDRESS)  # the new machine is plugged in
    d.install(NEW_ID)
    d.ops(*add_node[1:])
    d.start_node(NEW_ID)
    final = {**survivors, NEW_ID: NEW_ADDRESS}
    wait_for(lambda: agreed_leader(d, final), 90, f"{NEW_ID} to join and agree on the leader", interval=0.5)
    d.cluster.append(grpc_of(NEW_ADDRESS))  # the operator's list still names the dead machine too

    def caught_up() -> bool:
        mine, leader = status(d, "--cluster", grpc_of(NEW_ADDRESS)), status(d)
        members = sorted((m.id, m.reachable) for m in mine.members)
        return members == [(n, True) for n in sorted(final)] and mine.applied_index >= leader.commit_index - 50

    wait_for(caught_up, 60, f"{NEW_ID} to list every member reachable and catch up", interval=1.0)
    return now_ms()


def stop_timeout(unit: str) -> float:
    return seconds(read_unit(UNIT_DIR / unit).value("Service", "TimeoutStopSec"))


def once(d: Deployment, n: int) -> str:
    """A one-off job due in an hour: an acknowledged write to find on every member at the end."""
    return create(d, "--name", f"{PREFIX}once-{n}", "--after", "1h", "--type", "noop").job_id


def update_members(d: Deployment, final: dict[str, str], exec_host: str) -> None:
    """The last step of the replacement: cluster.toml everywhere lists the current members, for executors
    (and clients) that read their nodes there; a restarted executor and node take it."""
    d.write_members(list(final), final)
    assert d.terminate(f"executor-{exec_host}-default", stop_timeout(EXECUTOR_UNIT)) == 0
    d.start_executor(exec_host, "default", EXECUTOR_ARGS)
    assert d.terminate(f"node-{exec_host}", stop_timeout(NODE_UNIT)) == 0
    d.start_node(exec_host)
    wait_for(lambda: agreed_leader(d, final), 60, f"{exec_host} back with the new members in its config", interval=0.5)


def check_every_instant_fired_once(
    d: Deployment, tick: pb.Job, final: dict[str, str], acknowledged: list[str], after_ms: int
) -> None:
    """Pause the tick job, let its last run finish, and read every member's history (from the operator's machine)."""
    d.ops("job", "pause", tick.job_id)
    active = (pb.RUN_STATUS_PENDING, pb.RUN_STATUS_LEASED)
    wait_for(lambda: all(r.status not in active for r in runs(d, tick.job_id)), 30, "the tick job's last run to finish")
    nodes = [arg for n, a in final.items() for arg in ("--node", f"{n}={grpc_of(a)}")]
    history = load(d.ops_python("-m", "tests.remote_history", *nodes, "--job", tick.job_id, "--prefix", PREFIX))
    first = cv.ts_ms(tick.created_at) + 1000
    interval = IntervalJob(tick.job_id, 1000, first_ms=first, fired_after_ms=after_ms, skips_allowed=False)
    check_history(history, Expected(acknowledged=acknowledged, interval=[interval], nodes=set(final)))


def test_the_guide_on_three_hosts_then_a_dead_machine_replaced(deployment: Deployment) -> None:
    d = deployment
    leader = start_cluster(d)
    exec_host = min(n for n in NODES if n != leader)
    d.start_executor(exec_host, "default", EXECUTOR_ARGS)
    tick = create(d, "--name", f"{PREFIX}tick", "--every", "1s", "--type", "shell", "--payload", TICK)
    acknowledged = [tick.job_id, once(d, 1)]
    wait_for(lambda: succeeded_after(d, tick.job_id, 0, 3), 60, "the tick job to fire and succeed 3 times", interval=1.0)
    assert leaders_by_metrics(d, list(NODES.values())) == 1

    # the leader's machine dies: the node is SIGKILLed and the machine is off the network
    d.kill(f"node-{leader}")
    d.net.unplug(leader)
    survivors = {n: a for n, a in NODES.items() if n != leader}
    wait_for(lambda: agreed_leader(d, survivors), 60, "a new leader among the survivors", interval=0.5)
    acknowledged.append(once(d, 2))

    joined_at = replace(d, leader, survivors)
    final = {**survivors, NEW_ID: NEW_ADDRESS}
    update_members(d, final, exec_host)
    acknowledged.append(once(d, 3))
    backup = d.root / "state.backup"
    said = d.ops("cluster", "backup", "--token-file", str(d.trusted / "tokens" / "backup.token"), str(backup)).stdout
    assert "backup of the state at index" in said and backup.stat().st_size > 0
    late = wait_for(lambda: succeeded_after(d, tick.job_id, joined_at + 2000, 3), 60, "the job to go on firing", interval=1.0)
    # its output is in the [logs] dir of the executor's machine: that machine's node reads it back
    said = d.ops("run", "logs", late[-1].run_id, "--cluster", grpc_of(final[exec_host])).stdout
    assert f"tick {late[-1].run_id}" in said, said
    assert leaders_by_metrics(d, list(final.values())) == 1

    check_every_instant_fired_once(d, tick, final, acknowledged, joined_at + 2000)

    # systemctl stop: SIGTERM, and each stops with status 0 within its unit's TimeoutStopSec
    stops = {f"executor-{exec_host}-default": stop_timeout(EXECUTOR_UNIT)} | {f"node-{n}": stop_timeout(NODE_UNIT) for n in final}
    codes = {name: d.terminate(name, limit) for name, limit in stops.items()}
    assert codes == dict.fromkeys(stops, 0), json.dumps(codes)
