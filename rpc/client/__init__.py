"""The Python client: ``Client`` (any node, retries UNAVAILABLE across nodes), the executor's ``GrpcLeaseApi``,
``ChannelSecurity`` (TLS, client certificate, bearer token), ``RunFollower`` (WatchRuns that fails over
and resumes), and readable errors (``describe``, ``ClusterUnreachable``)."""

from raftsched.rpc.client.channel import ChannelSecurity
from raftsched.rpc.client.client import Client
from raftsched.rpc.client.errors import ClusterUnreachable, RpcFailure, describe
from raftsched.rpc.client.lease_api import GrpcLeaseApi
from raftsched.rpc.client.watch import RunFollower

__all__ = ["ChannelSecurity", "Client", "ClusterUnreachable", "GrpcLeaseApi", "RpcFailure", "RunFollower", "describe"]
