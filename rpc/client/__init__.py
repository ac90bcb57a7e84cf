"""The Python client: ``Client`` (any node, retries UNAVAILABLE across nodes), the executor's ``GrpcLeaseApi``,
``ChannelSecurity`` (TLS, client certificate, bearer token), ``RunFollower`` (WatchRuns that fails over
and resumes), and readable errors (``describe``, ``ClusterUnreachable``).

The names load when first used: a command-line client that never leases does not import the executor's
modules ``GrpcLeaseApi`` needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raftsched.cluster.domain.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from raftsched.rpc.client.channel import ChannelSecurity
    from raftsched.rpc.client.client import Client
    from raftsched.rpc.client.errors import ClusterUnreachable, RpcFailure, describe
    from raftsched.rpc.client.lease_api import GrpcLeaseApi
    from raftsched.rpc.client.watch import RunFollower

_WHERE = {
    "ChannelSecurity": "channel",
    "Client": "client",
    "ClusterUnreachable": "errors",
    "GrpcLeaseApi": "lease_api",
    "RpcFailure": "errors",
    "RunFollower": "watch",
    "describe": "errors",
}

__all__ = ["ChannelSecurity", "Client", "ClusterUnreachable", "GrpcLeaseApi", "RpcFailure", "RunFollower", "describe"]


__getattr__ = lazy_getattr(__name__, _WHERE, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
