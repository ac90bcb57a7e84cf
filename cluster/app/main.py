"""The ``raftsched`` command: ``node`` and ``executor`` run processes; ``job``, ``run``, ``cluster`` are the client;
``token create`` makes a bearer token, ``tls ca|cert`` certificates."""

from __future__ import annotations

import argparse
import os
import sys


def _no_grpc_fork_handlers() -> None:
    """Before gRPC loads: no gRPC fork handlers. A node forks to write each snapshot, and the child
    only encodes and writes; with fork support on, gRPC sometimes quiesced the parent's gRPC
    around the fork and restarted its threads in the child, and snapshot children died of SIGSEGV
    in plain Python code (8 of 65 in the million-job runs). Executors' shell jobs fork too."""
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


class _Version(argparse.Action):
    """``--version``: the versions are looked up only when asked (reading package metadata is slow)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        from cluster.node.version import version_text

        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    from cluster.app import cli
    from cluster.app.client_security import add_security_args
    from cluster.app.executor_main import add_output_args, add_safety_args
    from cluster.app.tls_cli import add_tls_commands
    from cluster.app.token_cli import add_token_commands

    parser = argparse.ArgumentParser(
        prog="raftsched",
        description="raftsched: cron as a service on Raft",
        epilog="a local cluster to try it on: scripts/launch_cluster.sh (then `raftsched cluster status`)\n"
        "`raftsched COMMAND --help` says more about each command, with examples",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the versions of raftsched and of what it runs on")
    sub = parser.add_subparsers(dest="command", required=True)
    node = sub.add_parser(
        "node",
        help="run one scheduler node in the foreground",
        epilog="example:\n  raftsched node --config /etc/raftsched/cluster.toml --node-id n1",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    node.add_argument("--config", required=True, help="path to cluster.toml")
    node.add_argument("--node-id", required=True, help="this node's id in [[nodes]]")
    execu = sub.add_parser(
        "executor",
        help="run an executor that leases and runs jobs",
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
    cli.add_client_commands(sub)
    add_token_commands(sub)
    add_tls_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    _no_grpc_fork_handlers()
    from cluster.app import cli

    args = build_parser().parse_args(argv)
    if args.command == "node":
        from cluster.app.node_main import run_node

        return run_node(args.config, args.node_id)
    if args.command == "executor":
        from cluster.app.executor_main import run_executor

        return run_executor(args)
    if args.command == "token":
        from cluster.app.token_cli import run_token

        return run_token(args)
    if args.command == "tls":
        from cluster.app.tls_cli import run_tls

        return run_tls(args)
    return cli.run(args)


if __name__ == "__main__":
    sys.exit(main())
