"""The Python client: ``Client`` (any node, retries UNAVAILABLE across nodes), the executor's ``GrpcLeaseApi``,
and ``ChannelSecurity`` (TLS, client certificate, bearer token)."""

from rpc.client.channel import ChannelSecurity
from rpc.client.client import Client
from rpc.client.lease_api import GrpcLeaseApi

__all__ = ["ChannelSecurity", "Client", "GrpcLeaseApi"]
