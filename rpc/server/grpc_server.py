"""Builds the gRPC server of one node: plaintext, or TLS with ``credentials``; ``interceptors`` (metrics, then auth)
around every call; gRPC health checking (``health``) and server reflection listing every service."""

from __future__ import annotations

from concurrent import futures
from typing import Sequence

import grpc
from grpc_reflection.v1alpha import reflection

from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.server.health import GrpcHealth, reflected_services

MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def build_server(
    address: str,
    job: pb_grpc.JobServiceServicer,
    lease: pb_grpc.LeaseServiceServicer,
    cluster: pb_grpc.ClusterServiceServicer,
    workers: int = 64,
    credentials: grpc.ServerCredentials | None = None,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    health: GrpcHealth | None = None,
) -> grpc.Server:
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grpc"),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
        interceptors=interceptors,
    )
    pb_grpc.add_JobServiceServicer_to_server(job, server)
    pb_grpc.add_LeaseServiceServicer_to_server(lease, server)
    pb_grpc.add_ClusterServiceServicer_to_server(cluster, server)
    if health is not None:
        health.add_to_server(server)
    reflection.enable_server_reflection(reflected_services(health is not None), server)
    port = server.add_insecure_port(address) if credentials is None else server.add_secure_port(address, credentials)
    if port == 0:
        raise OSError(f"cannot listen for gRPC on {address}: is the port in use?")
    return server
