"""One scheduler node: the composition root that wires state machine, Raft, leader loop and gRPC.

``run_node`` runs it in the foreground until SIGTERM/SIGINT (graceful: stop
firing, drain RPCs, stop Raft, close the state) — or SIGKILL, after which the
state environment, journal and snapshot in ``data_dir/<node id>`` bring it
back (the log after the state's applied index replays) — or until it finds itself
removed from the cluster (it then retires its data dir and exits 0). The
membership it starts with comes from ``raftsched.cluster.app.node_boot`` (its data
dir's record, ``--join``, or the config's ``[[nodes]]``).
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import sys
from typing import Any, Callable

import grpc

from raftsched.cluster.app.data_dir import ensure_identity, mark_removed, record_membership
from raftsched.cluster.app.durable_machine import DurableMachine, open_state
from raftsched.cluster.app.log_setup import configure_logging
from raftsched.cluster.app.node_boot import Boot, prepare
from raftsched.cluster.app.observability import Observability
from raftsched.cluster.app.stop_signal import StopSignal
from raftsched.cluster.domain.commands import wire
from raftsched.cluster.domain.errors import NewerState
from raftsched.cluster.domain.leases import MAX_RUNS_PER_GRANT
from raftsched.cluster.domain.model import Member
from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.cluster.domain.validation import Limits
from raftsched.cluster.node.backup import open_backup
from raftsched.cluster.node.clock import Clock, SystemClock
from raftsched.cluster.node.clock_guard import ClockGuard
from raftsched.cluster.node.config import ClusterConfig, ConfigError, LogsConfig, load_config
from raftsched.cluster.node.disk_majority import DiskMajority
from raftsched.cluster.node.event_hub import EventHub
from raftsched.cluster.node.fitness import STORAGE, Fitness, FitnessLoop, FitnessView, StepAside
from raftsched.cluster.node.job_service import JobService
from raftsched.cluster.node.leader_loop import LeaderLoop
from raftsched.cluster.node.lease_service import LeaseService
from raftsched.cluster.node.membership import MembershipService
from raftsched.cluster.node.membership.keeper import MembershipKeeper
from raftsched.cluster.node.page_tokens import PageTokens, derive_key
from raftsched.cluster.node.replica import Replica
from raftsched.cluster.node.scope_lookup import ScopeReader
from raftsched.cluster.node.version import VersionReporter, raftsched_version
from raftsched.raft import snapshot_turns
from raftsched.raft.adapter import EXIT_UNSUPPORTED_COMMAND, RaftNode, RaftSettings
from raftsched.raft.lmdb_journal import JournalError
from raftsched.raft.snapshot_file import SnapshotError
from raftsched.rpc.server.auth import AuthInterceptor
from raftsched.rpc.server.cluster_servicer import ClusterServicer, cluster_status
from raftsched.rpc.server.grpc_server import build_server
from raftsched.rpc.server.job_servicer import JobServicer
from raftsched.rpc.server.lease_servicer import LeaseServicer
from raftsched.rpc.server.tls import host_warnings, server_credentials
from raftsched.rpc.server.tokens import TokenTable, load_tokens
from raftsched.storage.disk.durable_files import make_private_dir
from raftsched.storage.disk.lmdb_owner import WrongThreadError
from raftsched.storage.janitor import OutputJanitor
from raftsched.storage.reader import OutputReader
from raftsched.storage.s3_client import lazy_s3_client

log = logging.getLogger("raftsched.node")
#: the collector's thresholds in a node. A full collection (the whole heap: seconds with hundreds of thousands of
#: records kept) comes once per 100,000,000 net allocations, as with (50_000, 20, 100); the younger generations
#: are collected more often and so in shorter pauses: a collection of the middle generation held a node under
#: a backlog of 200,000 runs for 0.6-3 s (longer than an election timeout), one of the youngest 0.1-0.7 s; with
#: these thresholds, on one replica applying the same commands, at most 0.5 s and 0.03 s typically, for about
#: 8 % more time collecting in all
GC_THRESHOLDS = (10_000, 25, 400)

#: gRPC server threads kept for unary calls beyond the long-lived ones ([limits] max_watch_streams,
#: max_long_polls), so that no number of open streams and long polls can hold up a GetJob
UNARY_WORKERS = 64


def output_reader(logs: LogsConfig, location: OutputLocation | None = None) -> OutputReader:
    """Reads run output by URI; S3 with this node's [logs] endpoint and region (boto3 loaded on first use)."""

    def s3_reader() -> Any:
        from raftsched.storage.output_s3 import S3OutputReader

        return S3OutputReader(logs.endpoint_url, logs.region)

    return OutputReader(s3_reader, location=location)


def output_location(cfg: ClusterConfig) -> OutputLocation:
    """The node's own output store (``[logs]``): the only place it accepts, reads and deletes logs."""
    if cfg.logs.store == "s3":
        return OutputLocation(s3_bucket=cfg.logs.bucket, s3_prefix=cfg.logs.prefix)
    return OutputLocation(local_dir=os.path.abspath(cfg.output_dir()))


def page_tokens(cfg: ClusterConfig, secret: str | None) -> PageTokens:
    """Page tokens every node of the cluster issues and accepts alike: keyed by the Raft secret, or by the
    member list when there is none (loopback only)."""
    return PageTokens(derive_key(secret if secret else "\n".join(sorted(n.raft for n in cfg.nodes))))


def grpc_security(cfg: ClusterConfig, node_id: str) -> tuple[grpc.ServerCredentials | None, TokenTable | None]:
    """TLS credentials ([tls]) and the tokens ([auth]) for this node's gRPC server, every file checked
    now, before anything starts. Refuses to serve off loopback without both unless allow_insecure_grpc
    (then warns, at every start)."""
    warning = cfg.check_grpc_exposure(node_id)
    if warning:
        log.warning("%s", warning)
    credentials = None
    if cfg.tls is not None:
        tls = cfg.tls.for_node(node_id)
        credentials = server_credentials(tls)
        for text in host_warnings(tls, cfg.node(node_id).grpc):
            log.warning("%s", text)
    tokens = load_tokens(cfg.auth.tokens_file) if cfg.auth.tokens_file else None
    return credentials, tokens


def janitor_s3_client(logs: LogsConfig) -> Callable[[], Any] | None:
    return lazy_s3_client(logs.region, logs.endpoint_url) if logs.store == "s3" else None


class Node:
    def __init__(self, cfg: ClusterConfig, node_id: str, clock: Clock | None = None, boot: Boot | None = None) -> None:
        boot = boot or prepare(cfg, node_id, [])
        first_cfg, cfg = cfg, boot.cfg  # cfg.nodes: the membership this node starts with
        self.cfg = cfg
        self.node_id = node_id
        self.clock = clock or SystemClock()
        me = cfg.node(node_id)
        secret = cfg.read_secret()
        credentials, tokens = grpc_security(cfg, node_id)  # refuse before anything is created on disk
        node_dir = self.node_dir = cfg.node_dir(node_id)
        make_private_dir(node_dir)  # 0700, and so is data_dir when this creates it
        ensure_identity(node_dir, node_id, first_cfg, boot.joined)
        #: called once this node found itself removed from the cluster (``run_node``: stop, exit 0)
        self.on_removed: Callable[[], None] = lambda: None
        self.machine, self.state_store = open_state(cfg, node_dir)
        if self.state_store.set_aside:
            log.warning("%s; the state is rebuilt from the snapshot and the Raft log", self.state_store.set_aside)
        self.hub = EventHub(self.clock.now_ms)
        self.replica = Replica(self.machine, self.clock, self.hub, cfg.scheduler.request_timeout_s)
        t = cfg.raft
        settings = RaftSettings(
            self_address=me.raft,
            listen_address=me.raft_listen,
            peer_addresses=tuple(n.raft for n in cfg.nodes if n.id != node_id),
            journal_file=os.path.join(node_dir, "raft.lmdb"),
            journal_fsync=t.fsync,
            journal_map_size=t.max_log_bytes,
            dump_file=os.path.join(node_dir, "raft.snapshot"),
            # the nodes of one data dir (a local cluster on one disk) write their snapshots in turns
            snapshot_turn_lock=os.path.join(os.path.dirname(os.path.abspath(node_dir)), snapshot_turns.LOCK_NAME),
            password=secret,
            append_entries_period=t.append_entries_period,
            raft_min_timeout=t.raft_min_timeout,
            raft_max_timeout=t.raft_max_timeout,
            leader_fallback_timeout=t.leader_fallback_timeout,
            log_compaction_min_entries=t.snapshot_min_entries,
            log_compaction_min_time=t.snapshot_interval_s,
            # a grant's weight is the runs it may lease: one entry's grants stay within its fencing tokens
            max_batch_weight=MAX_RUNS_PER_GRANT,
        )
        version = raftsched_version()
        self.version_reporter = VersionReporter(self.replica, self.clock, node_id, version, me.raft)
        quotas = cfg.limits
        self.leader = LeaderLoop(
            self.replica, self.clock, cfg.scheduler, quotas.max_pending_runs, node_id, lambda: self.raft.term, self._may_act
        )
        durable = DurableMachine(self.machine, self.state_store, self.replica.restored)
        self.raft = RaftNode(settings, durable, self.replica.lock, self.replica.after_apply, lambda _: self.leader.wake())
        self.replica.attach(self.raft)
        self._guard_fitness(cfg, me.raft)
        self.ops = Observability(
            cfg, node_id, self.replica, self.raft, self.clock, tokens, self.fitness_view
        )  # health, metrics, HTTP
        location = output_location(cfg)
        self.janitor = OutputJanitor(self.raft.is_leader, janitor_s3_client(cfg.logs), location)
        self.replica.on_applied.append(self.janitor.on_applied)
        limits = Limits(cfg.scheduler.max_payload_bytes, quotas.max_jobs, quotas.max_pending_runs)
        reader = output_reader(cfg.logs, location)
        self.service = JobService(self.replica, self.clock, limits, reader, page_tokens(first_cfg, secret))
        self.leases = LeaseService(self.replica, self.clock, cfg.scheduler.max_result_bytes, location, quotas.max_long_polls)
        self.membership = MembershipService(self.replica, self.clock, node_id, tuple(n.id for n in cfg.nodes))
        self.keeper = MembershipKeeper(
            self.replica, self.raft.membership, self.raft, self.clock, node_id, boot.seed, lambda: self.leader.leading,
            self._members_settled, self._removed,
            removed_after_s=2 * t.raft_max_timeout + 0.5, hold_until_index=boot.hold_until_index,
        )  # fmt: skip
        # the metrics interceptor first: it times and counts the whole call, refusals by the auth one included
        interceptors = self.ops.interceptors + ([] if tokens is None else [AuthInterceptor(tokens, ScopeReader(self.replica))])
        version_text = f"{version} (command format {wire.FORMAT_VERSION})"
        cluster = ClusterServicer(
            self.raft, node_id, cfg.nodes, self.service.counts, version_text,
            self.membership, lambda timeout: open_backup(self.replica, self.raft, self.clock, timeout), self.fitness_view,
        )  # fmt: skip
        self.ops.serve_web_view(
            self.service,
            lambda: cluster_status(self.raft, node_id, cfg.nodes, None, version_text, self.membership.view(), self.fitness_view),
            self.clock.now_ms,
            actor=self.service,
        )
        self.server = build_server(
            me.grpc_listen,
            JobServicer(self.service, self.hub, quotas.max_watch_streams),
            LeaseServicer(self.leases),
            cluster,
            workers=UNARY_WORKERS + quotas.max_watch_streams + quotas.max_long_polls,
            credentials=credentials,
            interceptors=interceptors,
            health=self.ops.grpc_health,
        )

    def _guard_fitness(self, cfg: ClusterConfig, self_raft: str) -> None:
        """The clock guard, the disk and stepping aside (``raftsched.cluster.node.clock_guard``, ``raftsched.cluster.node.fitness``,
        ``raftsched.cluster.node.disk_majority``): what this node says of itself in its Raft probes, and what keeps it from
        stamping, proposing, firing and leading."""
        raft = self.raft
        self.fitness = Fitness()
        peers = lambda: raft.membership.members()[1:]  # noqa: E731 - the members but this node, now
        names = {n.raft: n.id for n in cfg.nodes}

        def name(address: str) -> str:
            return str(self.ops.names.get(address, names.get(address, address)))

        self.clock_guard = ClockGuard(self.fitness, self.clock, raft.peer_probes.readings, peers, cfg.max_clock_offset_ms, name)
        self.replica.stamp_refusal = self.clock_guard.stamp_refusal
        raft.on_storage(lambda problem: self.fitness.set(STORAGE, problem))  # the Raft log's and the state's
        self.replica.disk_refusal = lambda: self.fitness.problems().get(STORAGE)
        disks = DiskMajority(self.fitness, raft.membership.members, raft.peer_probes.reports, name)
        self.replica.disks_exhausted = disks.exhausted
        raft.peer_probes.report = self.fitness.report
        aside = StepAside(self.fitness, raft.is_leader, raft.membership, peers, raft.peer_probes.reports)
        self.fitness_loop = FitnessLoop([self.clock_guard.update, aside.step])
        self.fitness_view = FitnessView(self_raft, self.fitness, self.clock_guard.offsets, raft.peer_probes.reports)

    def _may_act(self) -> str | None:
        """Why the leader must not fire, grant or expire now (None: it may)."""
        guard = getattr(self, "clock_guard", None)
        if guard is None:
            return "this node is still starting"
        return guard.stamp_refusal() or (self.fitness.reason() or None)

    def _members_settled(self, members: tuple[Member, ...]) -> None:
        """The keeper saw the members change (and at start): the data dir records them, health names them."""
        record_membership(self.node_dir, members)
        self.ops.learn_members(members)

    def _removed(self, reason: str) -> None:
        """The keeper found this node out of the cluster: retire the data dir, answer, then stop."""
        mark_removed(self.node_dir, reason)
        log.warning("%s: this node stops serving; its data dir %s is retired (a restart refuses it)", reason, self.node_dir)
        self.membership.removed.set()
        self.on_removed()

    def start(self) -> None:
        self.server.start()
        self.fitness_loop.start()
        self.ops.start()
        self.leader.start()
        self.version_reporter.start()
        self.keeper.start()
        me = self.cfg.node(self.node_id)
        log.info(
            "node %s serving gRPC on %s (advertised %s; %s, %s), Raft on %s (advertised %s); Raft log fsync %s",
            self.node_id,
            me.grpc_listen,
            me.grpc,
            "plaintext" if self.cfg.tls is None else ("mutual TLS" if self.cfg.tls.client_auth else "TLS"),
            "tokens required" if self.cfg.auth.tokens_file else "no tokens",
            me.raft_listen,
            me.raft,
            "on" if self.cfg.raft.fsync else "OFF: a power loss may lose acknowledged writes",
        )
        log.info("node %s: %s", self.node_id, self.ops.describe())

    def stop(self) -> None:
        log.info("node %s stopping", self.node_id)
        self.ops.stop()
        self.keeper.stop()
        self.version_reporter.stop()
        self.leader.stop()
        self.fitness_loop.stop()
        self.server.stop(grace=2).wait(3)
        self.raft.stop()
        try:
            self.state_store.close()
        except WrongThreadError as exc:  # the tick thread outlived raft.stop's wait, mid-entry: leave the file to it
            log.error("node %s: the state file was left open: %s; the next start replays what it lacks", self.node_id, exc)


def run_node(
    config_path: str,
    node_id: str,
    join: list[str] | None = None,
    security: Callable[[ClusterConfig], Any] | None = None,
    log_format: str = "text",
    log_level: str = "INFO",
) -> int:
    """``join``: addresses to ask for the membership (``--join``); ``security(cfg)``: the channel security to ask with."""
    gc.set_threshold(*GC_THRESHOLDS)
    faulthandler.enable()  # a crash (of the node or of a snapshot child) leaves its Python stack in the log
    configure_logging(log_format, log_level, {"node": node_id}, f"%(asctime)s {node_id} %(name)s %(levelname)s %(message)s")
    os.umask(0o077)  # whatever this process creates is its owner's only (explicit modes are set as well)
    try:
        cfg = load_config(config_path)
        boot = prepare(cfg, node_id, join or [], security(cfg) if security and join else None)
        node = Node(cfg, node_id, boot=boot)
    except NewerState as exc:  # as a newer entry in its log would: stop, and keep the data dir as it is
        log.critical("stopping this node: %s. Nothing was applied; its data dir is kept as it is", exc)
        return EXIT_UNSUPPORTED_COMMAND
    except (ConfigError, SnapshotError, JournalError, OSError) as exc:
        log.error("cannot start node %s: %s", node_id, exc)
        return 2
    stop = StopSignal()
    node.on_removed = stop.stop
    node.start()
    stop.wait()
    node.stop()
    return 0


def restore_node(backup: str | None, config_path: str, node_id: str) -> int:
    """``raftsched node restore FILE``: seed ``node_id``'s empty data dir of a new cluster from a backup."""
    from raftsched.cluster.app.backup_restore import restore_data_dir

    if not backup:
        print(
            "raftsched node restore: give the backup file: raftsched node restore FILE --config C --node-id ID", file=sys.stderr
        )
        return 2
    os.umask(0o077)
    try:
        node_dir, index = restore_data_dir(backup, load_config(config_path), node_id)
    except (ConfigError, OSError) as exc:
        print(f"raftsched node restore: {exc}", file=sys.stderr)
        return 2
    print(
        f"restored {backup} (state at index {index}) into {node_dir}; restore every node of the new cluster the same way, then start them"
    )
    return 0
