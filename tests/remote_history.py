"""A run history read on another host: for clusters whose addresses only a network namespace reaches.

The test process cannot reach a node inside a test network (``tests.netns``);
it runs this module on a host of that network instead:

    ip netns exec <host> python -m tests.remote_history --node n1=10.213.0.1:50051 ... --job J ... [--prefix P]

which reads the history as ``tests.history_read.read_nodes`` does (TLS and the
token from ``$RAFTSCHED_CA_FILE``/``$RAFTSCHED_TOKEN_FILE``, as every client
command) and prints it as JSON; ``load`` turns that back into a ``History``
for ``tests.history.check_history``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from raftsched.cluster.app.client_security import security_from_args
from tests.history import History, RunRecord
from tests.history_read import read_nodes


def dump(history: History) -> str:
    return json.dumps(
        {
            "runs": {node: [dataclasses.asdict(r) for r in runs] for node, runs in history.runs.items()},
            "jobs": {node: sorted(ids) for node, ids in history.jobs.items()},
        }
    )


def load(text: str) -> History:
    raw = json.loads(text)
    return History(
        runs={node: [RunRecord(**r) for r in runs] for node, runs in raw["runs"].items()},
        jobs={node: set(ids) for node, ids in raw["jobs"].items()},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.remote_history")
    parser.add_argument("--node", action="append", default=[], help="ID=HOST:PORT (repeatable)")
    parser.add_argument("--job", action="append", default=[], help="a job whose runs to read (repeatable)")
    parser.add_argument("--prefix", default=None, help="also read the ids of the jobs named with this prefix")
    args = parser.parse_args(argv)
    addresses = dict(pair.split("=", 1) for pair in args.node)
    history = read_nodes(addresses, args.job, args.prefix, security=security_from_args(argparse.Namespace()))
    print(dump(history))
    return 0


if __name__ == "__main__":
    sys.exit(main())
