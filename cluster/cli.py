"""The ``raftsched`` command: ``node`` and ``executor`` run processes; ``job``, ``run``, ``cluster`` are the client."""

from __future__ import annotations

import argparse
import sys

from rpc import cli as client_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raftsched", description="raftsched: cron as a service on Raft")
    sub = parser.add_subparsers(dest="command", required=True)
    node = sub.add_parser("node", help="run one scheduler node in the foreground")
    node.add_argument("--config", required=True, help="path to cluster.toml")
    node.add_argument("--node-id", required=True, help="this node's id in [[nodes]]")
    execu = sub.add_parser("executor", help="run an executor that leases and runs jobs")
    execu.add_argument("--config", help="path to cluster.toml")
    execu.add_argument("--cluster", help="comma-separated gRPC addresses instead of --config")
    execu.add_argument("--queue", action="append", default=[], help="queue to serve (repeatable)")
    execu.add_argument("--concurrency", type=int, default=4)
    client_cli.add_client_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "node":
        from cluster.node import run_node

        return run_node(args.config, args.node_id)
    if args.command == "executor":
        print(
            "raftsched executor: executors are not available in this version yet (leases are coming); "
            "runs stay PENDING until then",
            file=sys.stderr,
        )
        return 2
    return client_cli.run(args)


if __name__ == "__main__":
    sys.exit(main())
