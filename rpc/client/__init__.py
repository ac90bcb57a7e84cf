"""The Python client: ``Client`` (any node, retries UNAVAILABLE across nodes), the executor's ``GrpcLeaseApi``,
``ChannelSecurity`` (TLS, client certificate, bearer token), ``RunFollower`` (WatchRuns that fails over
and resumes), and readable errors (``describe``, ``ClusterUnreachable``)."""

from rpc.client.channel import ChannelSecurity
from rpc.client.client import Client
from rpc.client.errors import ClusterUnreachable, RpcFailure, describe
from rpc.client.lease_api import GrpcLeaseApi
from rpc.client.watch import RunFollower

__all__ = ["ChannelSecurity", "Client", "ClusterUnreachable", "GrpcLeaseApi", "RpcFailure", "RunFollower", "describe"]
