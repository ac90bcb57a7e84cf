"""The Python client: ``Client`` (any node, retries UNAVAILABLE across nodes) and the executor's ``GrpcLeaseApi``."""

from rpc.client.client import Client

__all__ = ["Client"]
