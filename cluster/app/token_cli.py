"""``raftsched token create``: a new bearer token and the ``[[token]]`` table that lets it in.

The secret is printed once (or written to ``--out``, readable by its owner
only); the table holds only its SHA-256, to be added to the ``tokens_file`` of
every node (then restart the nodes, one at a time).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from raftsched.cluster.node.config import ConfigError
from raftsched.rpc.server.tokens import ROLES, new_token, token_entry


def add_token_commands(sub: Any) -> None:
    token = sub.add_parser("token", help="make bearer tokens for [auth] tokens_file").add_subparsers(dest="action", required=True)
    create = token.add_parser(
        "create",
        help="a new token and its [[token]] table (the secret is shown once)",
        epilog="example:\n  raftsched token create --name reports-team --role submitter --queue reports --out reports.token "
        ">> tokens.toml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    create.add_argument("--name", required=True, help="who it is for; executors act as NAME or NAME/<suffix>")
    create.add_argument("--role", action="append", required=True, choices=ROLES, help="a role (repeatable)")
    create.add_argument("--queue", action="append", default=[], help="limit it to this queue (repeatable; default: any)")
    create.add_argument(
        "--type", action="append", default=[], help="limit a submitter to this job type (repeatable; default: any)"
    )
    create.add_argument("--out", help="write the secret to this new file (mode 0600) instead of printing it")


def run_token(args: argparse.Namespace) -> int:
    secret = new_token()
    try:
        entry = token_entry(args.name, secret, args.role, args.queue, args.type)
    except ConfigError as exc:
        print(f"raftsched: {exc}", file=sys.stderr)
        return 2
    if args.out:
        try:
            fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            print(f"raftsched: cannot create {args.out}: {exc.strerror} (it must not exist yet)", file=sys.stderr)
            return 2
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secret + "\n")
        print(f"# the token is in {args.out}: give it to {args.name} (--token-file {args.out})", file=sys.stderr)
    else:
        print(
            f"# the token for {args.name}, shown only this once (keep it in a file readable by its owner only):", file=sys.stderr
        )
        print(secret)
    print("# add this to the [auth] tokens_file of every node, then restart them one at a time:", file=sys.stderr)
    print(entry, end="")
    return 0
