"""``raftsched worker MODULE:ATTR``: run a Python SDK ``Worker`` (``raftsched.Worker``) from the command line.

``MODULE:ATTR`` names the worker (``myapp.jobs:worker``), or a function that
returns one; the module is imported with the current directory first on the
path, as ``python -m`` would. The flags are ``raftsched executor``'s and
override what the object says: ``--queue`` (repeatable), ``--concurrency``,
``--executor-id``, ``--grace``, where the cluster is (``--cluster``,
``--config``), TLS and token (``--ca-file``, ``--cert-file``, ``--key-file``,
``--token-file``, ``--insecure``), where logs go (``--output-dir``,
``--logs-store``, ``--s3-*``, ``--log-limit-mb``, ``--log-spool-dir``, ``--live-interval``,
``--output-retry-seconds``) and the process's logging (``--log-format``,
``--log-level``). The executor's ``--handler`` and ``--allow-type`` have no
place here: a worker runs the tasks its code registers. Exit status: 0 after
a drain (SIGTERM, SIGINT), 2 when the worker cannot start for its settings, 1
when the cluster refused it or could not be reached (one line saying why).

The SDK sits beside this package and builds on it (``raftsched.sdk``), so
this module does not import it: it takes the object the user's module made
and drives it through ``configure`` and ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Any

from raftsched.cluster.app.client_security import add_security_args
from raftsched.cluster.app.executor_main import add_output_args, build_output_store, logs_config
from raftsched.cluster.app.log_setup import add_log_args, configure_logging
from raftsched.cluster.domain.errors import ConfigError, RaftschedError
from raftsched.cluster.executor.bounded_log import DEFAULT_LOG_LIMIT
from raftsched.cluster.executor.live_log import LiveSettings
from raftsched.cluster.executor.worker import OUTPUT_RETRY_S
from raftsched.cluster.node.config import LogsConfig

EPILOG = (
    "examples:\n"
    "  raftsched worker myjobs:worker          # myjobs.py here; the cluster of local-cluster/client.toml\n"
    "  raftsched worker app.tasks:worker --queue reports --concurrency 16 --config /etc/raftsched/cluster.toml"
)


def add_worker_command(sub: Any) -> None:
    """Add ``raftsched worker`` to the command line's subcommands."""
    p = sub.add_parser(
        "worker",
        help="run a Python SDK Worker (raftsched.Worker) defined in your code",
        description="raftsched worker MODULE:ATTR: run the Worker object (or a function returning one) named there; "
        "the flags override its settings",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="MODULE:ATTR", help="where the Worker is, e.g. myapp.jobs:worker")
    p.add_argument("--config", help="path to cluster.toml (its nodes, [logs] and [tls]) or a client config")
    p.add_argument("--cluster", help="comma-separated gRPC addresses (default: as the client commands find them)")
    p.add_argument("--queue", action="append", default=[], help="queue to serve (repeatable; default: the Worker's)")
    p.add_argument("--concurrency", type=int, help="tasks run at once (default: the Worker's)")
    p.add_argument("--executor-id", help="default: the Worker's, else host:pid (with a token: <its name>/host:pid)")
    p.add_argument(
        "--output-dir", help="where run logs go (default: [logs] dir of --config, else the client config's output_dir)"
    )
    p.add_argument("--grace", type=float, help="seconds running tasks get to finish on SIGTERM (default: the Worker's)")
    add_output_args(p)
    add_security_args(p)
    add_log_args(p)


def load_worker(target: str) -> Any:
    """The worker ``MODULE:ATTR`` names (``ATTR`` may be dotted; a function is called to make it)."""
    module, colon, attr = target.partition(":")
    if not colon or not module or not attr:
        raise ConfigError(f"{target!r}: name the worker as MODULE:ATTR, e.g. myjobs:worker")
    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"{target}: cannot import {module} ({exc}); modules are found in the current directory ({cwd}) and on the Python path"
        ) from exc
    finally:
        sys.path.remove(cwd)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{target}: {module} has no {attr}")
        obj = getattr(obj, part)
    if not _is_worker(obj) and callable(obj):
        obj = obj()
    if not _is_worker(obj):
        raise ConfigError(f"{target} is not a raftsched.Worker (nor a function returning one): its type is {type(obj).__name__}")
    return obj


def _is_worker(obj: Any) -> bool:
    return not isinstance(obj, type) and callable(getattr(obj, "configure", None)) and callable(getattr(obj, "run", None))


def _changed(args: argparse.Namespace, name: str, default: Any) -> Any:
    """The flag's value when it differs from its default (None otherwise: the Worker's own setting stays)."""
    value = getattr(args, name, None)
    return None if value == default else value


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The worker settings the flags give (``Worker.configure``'s arguments; None: not given)."""
    given = {
        "queues": args.queue or None,
        "concurrency": args.concurrency,
        "executor_id": args.executor_id,
        "grace": args.grace,
        "cluster": args.cluster,
        "config": args.config,
        "token_file": args.token_file,
        "ca_file": args.ca_file,
        "cert_file": args.cert_file,
        "key_file": args.key_file,
        "insecure": args.insecure or None,
        "output_dir": args.output_dir,
        "log_limit_mb": _changed(args, "log_limit_mb", DEFAULT_LOG_LIMIT / (1024 * 1024)),
        "log_spool_dir": args.log_spool_dir or None,
        "live_interval": _changed(args, "live_interval", LiveSettings().interval_s),
        "output_retry_s": _changed(args, "output_retry_seconds", OUTPUT_RETRY_S),
    }
    if args.logs_store == "s3":  # a store the flags describe wholly
        given["output"] = build_output_store(logs_config(args, LogsConfig()), "")
    return given


def run_worker(args: argparse.Namespace) -> int:
    """``raftsched worker``: 0 after a drain, 2 for settings it cannot use, 1 for a cluster that refused it."""
    configure_logging(args.log_format, args.log_level, {"worker": args.target}, "%(asctime)s worker %(levelname)s %(message)s")
    log = logging.getLogger("raftsched.worker")
    try:
        worker = load_worker(args.target)
        worker.configure(**overrides(args))
        worker.run()
    except ConfigError as exc:  # the SDK's ConfigurationError is one too
        log.error("cannot start the worker: %s", exc)
        return 2
    except RaftschedError as exc:  # the SDK's errors: the cluster refused or could not be reached
        log.error("the worker stopped: %s", exc)
        return 1
    return 0
