"""The ``raftsched`` command: ``node``, ``executor`` and ``worker`` (a Python SDK Worker) run processes; ``job``,
``run``, ``cluster`` are the client; ``token create`` makes a bearer token, ``tls ca|cert`` certificates."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable


def _no_grpc_fork_handlers() -> None:
    """Before gRPC loads: no gRPC fork handlers. Executors' shell jobs fork (and nodes did, to write
    snapshots, before their state moved into LMDB); with fork support on, gRPC sometimes quiesced the
    parent's gRPC around a fork and restarted its threads in the child, where children then died of
    SIGSEGV in plain Python code (8 of 65 snapshot children in the million-job runs)."""
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


class _Version(argparse.Action):
    """``--version``: the versions are looked up only when asked (reading package metadata is slow)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        from raftsched.cluster.node.version import version_text

        print(version_text())
        parser.exit()


#: the commands that run processes or make files, with their one-line help; the client nouns (job, run, cluster)
#: are ``raftsched.cluster.app.cli``'s
COMMAND_HELP = {
    "node": "run one scheduler node in the foreground (or: node restore FILE, to seed a new cluster's data dir)",
    "executor": "run an executor that leases and runs jobs",
    "worker": "run a Python SDK Worker (raftsched.Worker) defined in your code",
    "token": "make bearer tokens for [auth] tokens_file",
    "tls": "make a CA and certificates for [tls]",
}


def _add_node(sub: Any) -> None:
    from raftsched.cluster.app.client_security import add_security_args
    from raftsched.cluster.app.log_setup import add_log_args

    node = sub.add_parser(
        "node",
        help=COMMAND_HELP["node"],
        description="raftsched node --config C --node-id ID [--join H:P,...]  |  raftsched node restore FILE --config C --node-id ID",
        epilog="examples:\n  raftsched node --config /etc/raftsched/cluster.toml --node-id n1\n"
        "  raftsched node --config cluster.toml --node-id n4 --join 10.0.0.1:50051,10.0.0.2:50051   # a member added with cluster add-node\n"
        "  raftsched node restore backup.file --config cluster.toml --node-id n1   # seed a new cluster's node",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    node.add_argument("action", nargs="?", choices=["restore"], help="restore: seed this node's empty data dir from a backup")
    node.add_argument("file", nargs="?", help="the backup file (raftsched cluster backup FILE) for restore")
    node.add_argument("--config", required=True, help="path to cluster.toml")
    node.add_argument("--node-id", required=True, help="this node's id (in [[nodes]], or added with cluster add-node)")
    node.add_argument(
        "--join",
        default="",
        help="H:P[,H:P...]: gRPC addresses of members to ask for the membership (a node added with cluster add-node); "
        "ignored once the data dir records the membership",
    )
    add_security_args(node)
    add_log_args(node)


def _add_executor(sub: Any) -> None:
    from raftsched.cluster.app.client_security import add_security_args
    from raftsched.cluster.app.executor_main import add_output_args, add_safety_args
    from raftsched.cluster.app.log_setup import add_log_args

    execu = sub.add_parser(
        "executor",
        help=COMMAND_HELP["executor"],
        epilog="examples:\n  raftsched executor --config cluster.toml --queue default --allow-type shell\n"
        "  raftsched executor --queue reports --handler report=myjobs:make_report   # myjobs.py here; the cluster of "
        "local-cluster/client.toml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    execu.add_argument("--config", help="path to cluster.toml (its nodes, [logs] and [tls])")
    execu.add_argument(
        "--cluster",
        help="comma-separated gRPC addresses instead of --config (default: the client config, as the client commands find it)",
    )
    execu.add_argument("--queue", action="append", default=[], help="queue to serve (repeatable)")
    execu.add_argument("--concurrency", type=int, default=4, help="runs executed at once (default 4)")
    execu.add_argument(
        "--handler",
        action="append",
        default=[],
        help="TYPE=module:function: a Python handler (the module is looked up in the current directory first)",
    )
    execu.add_argument("--executor-id", default="", help="default: host:pid")
    execu.add_argument(
        "--output-dir",
        default="",
        help="where run logs go (default: [logs] dir of --config, else the client config's output_dir; the nodes accept logs only under their [logs] dir)",
    )
    execu.add_argument("--grace", type=float, default=30.0, help="seconds to finish running work on SIGTERM")
    add_safety_args(execu)
    add_output_args(execu)
    add_security_args(execu)
    add_log_args(execu)


def _add_worker(sub: Any) -> None:
    from raftsched.cluster.app.worker_main import add_worker_command

    add_worker_command(sub)


def _add_token(sub: Any) -> None:
    from raftsched.cluster.app.token_cli import add_token_commands

    add_token_commands(sub)


def _add_tls(sub: Any) -> None:
    from raftsched.cluster.app.tls_cli import add_tls_commands

    add_tls_commands(sub)


_ADDERS: dict[str, Callable[[Any], None]] = {
    "node": _add_node,
    "executor": _add_executor,
    "worker": _add_worker,
    "token": _add_token,
    "tls": _add_tls,
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With ``command`` (the first word of a command line, once the client flags
    are hoisted), only that command's arguments are built and the others are named with their help: each
    command's own modules load only when it runs (a client command starts without the executor's, the
    node's or the certificates' modules). Without it, the whole parser."""
    from raftsched.cluster.app import cli

    parser = argparse.ArgumentParser(
        prog="raftsched",
        description="raftsched: cron as a service on Raft",
        epilog="a local cluster to try it on: scripts/launch_cluster.sh (then `raftsched cluster status`)\n"
        "`raftsched COMMAND --help` says more about each command, with examples\n"
        "job, run and cluster take --cluster, --config, -o and the TLS and token flags before or after the command:\n"
        "  raftsched --cluster 10.0.0.1:50051 job list  is  raftsched job list --cluster 10.0.0.1:50051",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the versions of raftsched and of what it runs on")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add in _ADDERS.items():
        if command is None or command == name:
            add(sub)
        else:
            sub.add_parser(name, help=COMMAND_HELP[name])
        if name == "worker":  # the client nouns keep their place in the list of commands
            cli.add_client_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    _no_grpc_fork_handlers()
    from raftsched.cluster.app import cli
    from raftsched.cluster.app.client_security import security_from_args

    words = cli.hoist_client_flags(sys.argv[1:] if argv is None else list(argv))
    args = build_parser(words[0] if words and not words[0].startswith("-") else None).parse_args(words)
    if args.command == "node":
        from raftsched.cluster.app.node_main import restore_node, run_node

        if args.action == "restore":
            return restore_node(args.file, args.config, args.node_id)
        if args.file:
            print(
                f"raftsched node: unexpected argument {args.file!r} (did you mean: raftsched node restore FILE ...?)",
                file=sys.stderr,
            )
            return 2
        join = [a.strip() for a in args.join.split(",") if a.strip()]
        return run_node(
            args.config, args.node_id, join, lambda cfg: security_from_args(args, cfg), args.log_format, args.log_level
        )
    if args.command == "executor":
        from raftsched.cluster.app.executor_main import run_executor

        return run_executor(args)
    if args.command == "worker":
        from raftsched.cluster.app.worker_main import run_worker

        return run_worker(args)
    if args.command == "token":
        from raftsched.cluster.app.token_cli import run_token

        return run_token(args)
    if args.command == "tls":
        from raftsched.cluster.app.tls_cli import run_tls

        return run_tls(args)
    return cli.run(args)


if __name__ == "__main__":
    sys.exit(main())
