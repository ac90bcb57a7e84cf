"""``raftsched tls ca|cert``: a small CA for a cluster's gRPC TLS, without openssl.

``tls ca --dir pki`` writes ``pki/ca.crt`` and ``pki/ca.key`` (keep the key
off the nodes); ``tls cert --dir pki --name n1 --host 10.0.0.1`` writes
``pki/n1.crt`` and ``pki/n1.key`` for a node (every ``--host`` a client may
dial it by), or with ``--client`` a client certificate for ``[tls]
client_auth``. Keys are 0600; existing files are never overwritten.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from raftsched.cluster.app.pki import issue, load_ca, make_ca


def add_tls_commands(sub: Any) -> None:
    tls = sub.add_parser("tls", help="make a CA and certificates for [tls]").add_subparsers(dest="action", required=True)
    ca = tls.add_parser(
        "ca",
        help="a new CA: DIR/ca.crt (give to nodes and clients) and DIR/ca.key (keep safe)",
        epilog="example:\n  raftsched tls ca --dir pki",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ca.add_argument("--dir", required=True)
    ca.add_argument("--days", type=int, default=3650)
    cert = tls.add_parser(
        "cert",
        help="a node or client certificate signed by DIR/ca.key: DIR/NAME.crt and DIR/NAME.key",
        epilog="examples:\n  raftsched tls cert --dir pki --name n1 --host 10.0.0.1\n"
        "  raftsched tls cert --dir pki --name alice --client",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cert.add_argument("--dir", required=True, help="where ca.crt and ca.key are, and the new files go")
    cert.add_argument("--name", required=True, help="the node id (or the client's name)")
    cert.add_argument(
        "--host", action="append", default=[], help="an IP address or DNS name clients dial the node by (repeatable)"
    )
    cert.add_argument("--client", action="store_true", help="a client certificate (no --host)")
    cert.add_argument("--days", type=int, default=825)


def _free(*paths: str) -> str | None:
    taken = [p for p in paths if os.path.exists(p)]
    return f"{', '.join(taken)} already exist(s); move it away or choose another --dir/--name" if taken else None


def run_tls(args: argparse.Namespace) -> int:
    os.makedirs(args.dir, mode=0o700, exist_ok=True)
    ca_crt, ca_key = os.path.join(args.dir, "ca.crt"), os.path.join(args.dir, "ca.key")
    if args.action == "ca":
        problem = _free(ca_crt, ca_key)
        if problem is None:
            make_ca("raftsched CA", args.days).write(ca_crt, ca_key)
            print(f"wrote {ca_crt} (for every node and client: [tls] ca_file, --ca-file) and {ca_key} (keep it off the nodes)")
    else:
        crt, key = os.path.join(args.dir, f"{args.name}.crt"), os.path.join(args.dir, f"{args.name}.key")
        problem = _free(crt, key)
        if not args.client and not args.host:
            problem = "give --host for each address clients dial the node by (e.g. --host 10.0.0.1), or --client"
        elif args.client and args.host:
            problem = "a --client certificate names no --host"
        if problem is None:
            try:
                ca = load_ca(ca_crt, ca_key)
            except (OSError, ValueError) as exc:
                print(
                    f"raftsched: cannot load the CA from {args.dir} ({exc}); make one with raftsched tls ca --dir {args.dir}",
                    file=sys.stderr,
                )
                return 2
            issue(ca, args.name, args.host, args.days).write(crt, key)
            print(f"wrote {crt} and {key}" + ("" if args.client else f" naming {', '.join(args.host)}"))
    if problem is not None:
        print(f"raftsched: {problem}", file=sys.stderr)
        return 2
    return 0
