"""``raftsched executor``: run an executor process until SIGTERM (graceful) or SIGKILL.

The cluster comes from ``--config`` (a cluster.toml), ``--cluster``, or the
client config the command line finds by itself (``raftsched.cluster.app.client_config``:
``$RAFTSCHED_CONFIG``, ``local-cluster/client.toml`` that
``scripts/launch_cluster.sh`` writes, ...).

Run output goes to the store named by ``--logs-store`` or the config's
``[logs]`` section (flags win): ``local`` or ``s3`` (``--s3-bucket``,
``--s3-prefix``, ``--s3-region``, ``--s3-endpoint-url``; credentials by
boto3's usual chain). The nodes accept a local log only inside their own
output directory (``[logs] dir``, default ``<data_dir>/outputs``), so the
local store writes under ``--output-dir``, else that directory of
``--config``, else the ``output_dir`` of the client config that names these
nodes; with none of them the executor refuses to start and says what to
give. The store is checked before any run is leased — a wrong bucket or bad
credentials exit with status 2 and a message saying what to fix.

``--live-interval`` (default 1 s; 0: off) is how often a running attempt's new
output is shipped to the store as live parts (``raftsched.cluster.executor.live_log``),
so that ``raftsched run logs --follow`` shows it while the run goes.

Handlers (``--handler TYPE=module:function``) are imported with the current
directory first on the path, as ``python -m`` would.

TLS and the bearer token come from ``--ca-file``/``--cert-file``/``--key-file``/
``--token-file`` (or their environment variables, or ``[tls] ca_file`` of
``--config``: ``raftsched.cluster.app.client_security``). With a token, ``--executor-id``
is required: the node accepts only the token's name or ``name/...``.
What jobs may do here: ``--allow-type shell|http`` (both off unless named),
``--pass-env``, ``--kill-grace``, ``--run-as``, ``--containment``,
``--http-deny`` and ``--http-allow`` (``raftsched.cluster.app.executor_safety``).
An executor allowing ``shell`` or ``http`` refuses to start for a cluster
that answers calls without a token, unless ``--allow-unauthenticated-cluster``
(``executor_safety.check_cluster_closed``). At start the executor makes its
own process non-dumpable (``containment.make_undumpable``: a run of the same
user cannot read its environment or memory) and logs one line saying how
shell runs are contained. Failed calls are logged as one line each
(``raftsched.rpc.client.errors``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import socket
import sys
import time

from raftsched.cluster.app.client_config import ClientConfig, discover, load_any, resolve
from raftsched.cluster.app.client_security import security_from_args
from raftsched.cluster.app.executor_safety import (
    COMMAND_TYPES,
    OPEN_CLUSTER_FLAG,
    add_safety_args,
    builtin_settings,
    check_cluster_closed,
)
from raftsched.cluster.app.log_setup import configure_logging
from raftsched.cluster.app.stop_signal import StopSignal
from raftsched.cluster.domain.model import NOTIFY_QUEUE
from raftsched.cluster.domain.output import OutputStoreError
from raftsched.cluster.executor.bounded_log import LogSettings
from raftsched.cluster.executor.containment import make_undumpable
from raftsched.cluster.executor.handlers import GUARDED_TYPES, BuiltinSettings
from raftsched.cluster.executor.live_log import LiveSettings
from raftsched.cluster.executor.ports import OutputStore
from raftsched.cluster.executor.worker import OUTPUT_RETRY_S, Executor
from raftsched.cluster.node.config import ConfigError, LogsConfig
from raftsched.rpc.client.channel import ChannelSecurity
from raftsched.storage.local_store import LocalOutputStore

__all__ = ["add_output_args", "add_safety_args", "run_executor"]


def _load_handler(spec: str) -> tuple[str, object]:
    """``TYPE=module:function``; the module is looked up in the current directory first, as
    ``python -m`` would (only while handlers are imported: nothing else the executor imports can
    be shadowed by a file there)."""
    job_type, sep, target = spec.partition("=")
    module, colon, attr = target.partition(":")
    if not sep or not colon or not job_type or not module or not attr:
        raise ConfigError(f"--handler {spec!r}: use TYPE=module:function, e.g. report=myjobs:make_report")
    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"--handler {spec!r}: cannot import {module} ({exc}); modules are found in the current directory "
            f"({cwd}) and on the Python path"
        ) from exc
    finally:
        sys.path.remove(cwd)
    try:
        return job_type, getattr(loaded, attr)
    except AttributeError as exc:
        raise ConfigError(f"--handler {spec!r}: {module} has no {attr}") from exc


def add_output_args(p: argparse.ArgumentParser) -> None:
    """The executor's output-store flags (each overrides the config's [logs] key of the same name)."""
    p.add_argument("--logs-store", choices=["local", "s3"], help="where run output goes (default: [logs] store, else local)")
    p.add_argument("--s3-bucket", help="S3 bucket for run output ([logs] bucket)")
    p.add_argument("--s3-prefix", help="key prefix in the bucket ([logs] prefix, default 'raftsched')")
    p.add_argument("--s3-endpoint-url", help="an S3-compatible server, e.g. http://127.0.0.1:9000 ([logs] endpoint_url)")
    p.add_argument("--s3-region", help="the bucket's region ([logs] region)")
    p.add_argument(
        "--output-retry-seconds",
        "--s3-retry-seconds",
        dest="output_retry_seconds",
        type=float,
        default=OUTPUT_RETRY_S,
        help=f"how long a failing store is retried before a run completes with its output missing (default {OUTPUT_RETRY_S:g})",
    )
    p.add_argument("--log-limit-mb", type=float, default=64.0, help="log bytes kept per attempt: head and tail (default 64)")
    p.add_argument("--log-spool-dir", default="", help="where logs are spooled while a run goes (default: $TMPDIR)")
    p.add_argument(
        "--live-interval",
        type=float,
        default=LiveSettings().interval_s,
        metavar="SECONDS",
        help="ship a running attempt's new output to the store at most this often, for run logs --follow "
        "(default 1; 0: only when the attempt ends)",
    )


def logs_config(args: argparse.Namespace, base: LogsConfig) -> LogsConfig:
    """The config's [logs] with the command line's flags laid over it."""
    cfg = LogsConfig(
        store=getattr(args, "logs_store", None) or base.store,
        bucket=getattr(args, "s3_bucket", None) or base.bucket,
        prefix=base.prefix if getattr(args, "s3_prefix", None) is None else args.s3_prefix,
        endpoint_url=getattr(args, "s3_endpoint_url", None) or base.endpoint_url,
        region=getattr(args, "s3_region", None) or base.region,
    )
    if cfg.store == "s3" and not cfg.bucket:
        raise ConfigError("the s3 output store needs a bucket: --s3-bucket NAME or [logs] bucket")
    return cfg


def build_output_store(cfg: LogsConfig, output_dir: str) -> OutputStore:
    if cfg.store == "s3":
        from raftsched.storage.output_s3 import S3OutputStore

        try:
            return S3OutputStore(cfg.bucket, cfg.prefix, cfg.region, cfg.endpoint_url)
        except Exception as exc:  # noqa: BLE001 - boto3 refuses e.g. a malformed endpoint URL
            raise ConfigError(f"cannot set up the S3 output store for bucket {cfg.bucket!r}: {exc}") from exc
    return LocalOutputStore(output_dir)


def check_output_store(store: OutputStore, retry_s: float, log: logging.Logger) -> None:
    """Prove the store usable; retry a passing failure (an outage) for up to ``retry_s``, then give up."""
    deadline, delay = time.monotonic() + retry_s, 0.5
    while True:
        try:
            store.check()
            return
        except OutputStoreError as exc:
            if not exc.retryable or time.monotonic() + delay > deadline:
                raise ConfigError(str(exc)) from exc
            log.warning("output store not usable yet (%s); checking again in %.1f s", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


def _log_settings(limit_mb: float, spool_dir: str) -> LogSettings:
    try:
        settings = LogSettings(int(limit_mb * 1024 * 1024), spool_dir)
    except ValueError as exc:
        raise ConfigError(f"--log-limit-mb: {exc}") from exc
    if spool_dir:
        try:
            os.makedirs(spool_dir, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--log-spool-dir {spool_dir}: cannot create it: {exc.strerror}") from exc
        if not os.access(spool_dir, os.W_OK | os.X_OK):
            raise ConfigError(f"--log-spool-dir {spool_dir} is not writable by this user")
    return settings


def _live_settings(interval_s: float) -> LiveSettings:
    if not 0 <= interval_s <= 60:
        raise ConfigError(f"--live-interval {interval_s:g}: give 0 (off) to 60 seconds")
    return LiveSettings(interval_s=interval_s, max_backoff_s=max(30.0, interval_s))


NO_OUTPUT_DIR = (
    "cannot tell where run output goes: the nodes accept a run's log only inside their own output directory "
    "([logs] dir, default <data_dir>/outputs). Give --config cluster.toml (its [logs]), --output-dir DIR (that "
    "directory, on a disk the nodes read), or --logs-store s3 --s3-bucket NAME"
)


def resolve_target(args: argparse.Namespace) -> ClientConfig:
    """The cluster and the output directory (``raftsched.cluster.app.client_config``): --config, else --cluster with
    the client config found by itself when it names the same nodes, else that client config."""
    if args.config or not args.cluster:
        return resolve(args.cluster, args.config, os.environ)
    given = resolve(args.cluster, None, os.environ)
    found = discover(os.environ)
    if found is not None:
        known = load_any(found, found)
        if set(given.addresses) <= set(known.addresses):
            return ClientConfig(given.addresses, "--cluster", known.output_dir, known.files)
    return given


def _store_and_security(args: argparse.Namespace, target: ClientConfig) -> tuple[OutputStore, ChannelSecurity, float]:
    """The output store (where the nodes accept output), the channel security and the store's retry span."""
    cfg = target.cluster
    logs = logs_config(args, cfg.logs if cfg is not None else LogsConfig())
    output_dir = args.output_dir or target.output_dir
    if logs.store == "local" and not output_dir:
        raise ConfigError(NO_OUTPUT_DIR)
    security = security_from_args(args, cfg, os.environ, target.files, target.addresses)
    if security.token and not args.executor_id:
        raise ConfigError("with a token, give --executor-id: the token's name, or name/<suffix> for several executors")
    retry_s = getattr(args, "output_retry_seconds", OUTPUT_RETRY_S)
    if retry_s < 0:
        raise ConfigError("--output-retry-seconds must not be negative")
    return build_output_store(logs, output_dir), security, retry_s


def _check_who_may_submit(
    args: argparse.Namespace, allow: list[str], target: ClientConfig, security: ChannelSecurity, log: logging.Logger
) -> None:
    """Refuse to run commands for a cluster that takes calls without a token (``executor_safety``)."""
    commands = [t for t in COMMAND_TYPES if t in allow]
    if not commands:
        return
    if getattr(args, "allow_unauthenticated_cluster", False):
        log.warning(
            "%s: this executor runs %s jobs even if the cluster takes calls without a token, so anyone who can "
            "reach the cluster may run commands as this executor's user",
            OPEN_CLUSTER_FLAG,
            " and ".join(commands),
        )
        return
    check_cluster_closed(target.addresses, security, commands, log, target.source)


def _say_containment(allow: list[str], builtin: BuiltinSettings, undumpable: bool, log: logging.Logger) -> None:
    """Say in one line how shell runs are contained (and whether this process is dumpable)."""
    if "shell" not in allow:
        return
    containment = builtin.shell.containment
    line = containment.describe() if containment is not None else "shell runs: containment not resolved"
    user = builtin.shell.run_as
    line += f"; commands run as {user.name} (uid {user.uid})" if user is not None else ""
    line += "; the executor is not dumpable" if undumpable else "; the executor could not make itself non-dumpable"
    log.log(logging.INFO if containment is not None and containment.namespaced else logging.WARNING, "%s", line)


def run_executor(args: argparse.Namespace) -> int:
    from raftsched.rpc.client.client import Client
    from raftsched.rpc.client.lease_api import GrpcLeaseApi

    undumpable = make_undumpable()  # first: no run of this user may read our environment or memory
    executor_id = args.executor_id or f"{socket.gethostname()}:{os.getpid()}"
    configure_logging(
        getattr(args, "log_format", "text"),
        getattr(args, "log_level", "INFO"),
        {"executor": executor_id},
        f"%(asctime)s executor {executor_id} %(levelname)s %(message)s",
    )
    log = logging.getLogger("raftsched.executor")
    try:
        target = resolve_target(args)
        store, security, retry_s = _store_and_security(args, target)
        handlers = dict(_load_handler(h) for h in args.handler)
        allow = list(getattr(args, "allow_type", []))
        unknown = sorted(set(allow) - set(GUARDED_TYPES) - set(handlers) - {"noop"})
        if unknown:
            raise ConfigError(
                f"--allow-type {', '.join(unknown)}: only {', '.join(GUARDED_TYPES)} need allowing "
                "(noop and --handler types are always on)"
            )
        builtin = builtin_settings(args)
        if args.concurrency < 1:
            raise ConfigError("--concurrency must be at least 1")
        log_settings = _log_settings(getattr(args, "log_limit_mb", 64.0), getattr(args, "log_spool_dir", ""))
        live = _live_settings(getattr(args, "live_interval", LiveSettings().interval_s))
        check_output_store(store, retry_s, log)
        _check_who_may_submit(args, allow, target, security, log)
    except ConfigError as exc:
        log.error("cannot start executor: %s", exc)
        return 2
    _say_containment(allow, builtin, undumpable, log)
    client = Client(target.addresses, deadline_s=30, prefer_leader=True, security=security)
    client.source = target.source
    queues = list(args.queue or ["default"])
    if "notify" in allow and NOTIFY_QUEUE not in queues:
        queues.append(NOTIFY_QUEUE)  # notifications are offered there
    executor = Executor(
        GrpcLeaseApi(client, executor_id),
        queues,
        args.concurrency,
        handlers,  # type: ignore[arg-type]
        store,
        log_settings=log_settings,
        output_retry_s=retry_s,
        allow_types=allow,
        builtin=builtin,
        live=live,
    )
    stop = StopSignal()
    executor.start()
    log.info(
        "serving queues %s, job types %s, with %d workers; output in %s",
        ",".join(executor.queues),
        ",".join(executor.types()),
        args.concurrency,
        store.describe(),
    )
    stop.wait()
    log.info("stopping: no new runs; up to %.0f s for running ones", args.grace)
    executor.stop(args.grace)
    client.close()
    log.info("stopped: %d runs completed, %d leases lost", executor.completed, executor.lost)
    return 0
