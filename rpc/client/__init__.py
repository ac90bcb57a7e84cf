"""The Python client: ``Client`` (any node, retries UNAVAILABLE across nodes) and the executor's ``GrpcLeaseApi``."""

from rpc.client.client import Client
from rpc.client.lease_api import GrpcLeaseApi

__all__ = ["Client", "GrpcLeaseApi"]
