"""The client a command talks through: the cluster's addresses (``raftsched.cluster.app.client_config``), TLS
and token (``raftsched.cluster.app.client_security``), and the command line's patience.

Every call rotates over all known nodes; a node that does not complete a
connection within ``CONNECT_TIMEOUT_S`` counts as down, and when no node
answers for ``UNREACHABLE_AFTER_S`` the command stops with "no node of the
cluster answers at ...: is it running?". A node that answers UNAVAILABLE (no
leader yet: an election takes a second or two) is retried for up to
``DEADLINE_S``.
"""

from __future__ import annotations

import argparse
import os

from raftsched.cluster.app.client_config import resolve
from raftsched.cluster.app.client_security import security_from_args
from raftsched.rpc.client.client import Client

CONNECT_TIMEOUT_S = 1.0
UNREACHABLE_AFTER_S = 0.6
DEADLINE_S = 15.0


def connect(a: argparse.Namespace) -> Client:
    """A client for the nodes and the TLS/token settings the flags, environment or client config name."""
    found = resolve(a.cluster, a.config, os.environ)
    security = security_from_args(a, found.cluster, os.environ, found.files, found.addresses)
    client = Client(
        found.addresses,
        deadline_s=DEADLINE_S,
        security=security,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        unreachable_after_s=UNREACHABLE_AFTER_S,
    )
    client.source = found.source if found.source not in ("--cluster", "the default address") else ""
    return client
