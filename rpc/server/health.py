"""gRPC health checking (``grpc.health.v1.Health``) and the service names reflection lists.

``GrpcHealth`` answers ``SERVING`` for ``""`` (the whole server) and for each
of our services while the node sees a leader and a quorum, ``NOT_SERVING``
otherwise; ``on_health`` is a ``raftsched.cluster.node.health.HealthMonitor`` listener
that flips them (both ways) as that changes. ``Watch`` streams are
non-blocking (grpcio-health-checking's default): an open watch holds no
worker thread. Health and reflection need no token (``raftsched.rpc.server.auth``
leaves ``grpc.health.v1.*`` and ``grpc.reflection.*`` open), so probes and
generic tools (grpcurl, grpc_health_probe) work against a secured node.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from raftsched.cluster.node.health import Health
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb

#: our services, by full name (what health answers for, besides "", and what reflection lists)
SERVICES = tuple(s.full_name for s in pb.DESCRIPTOR.services_by_name.values())
#: the overall status of the server
OVERALL = health.OVERALL_HEALTH


class GrpcHealth:
    def __init__(self) -> None:
        self.servicer = health.HealthServicer(experimental_non_blocking=True)
        self.set_serving(False)  # until the first look at Raft says otherwise

    def set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in (OVERALL, *SERVICES):
            self.servicer.set(name, status)

    def on_health(self, before: Health | None, now: Health) -> None:
        """A ``HealthMonitor`` listener."""
        if before is None or before.serving != now.serving:
            self.set_serving(now.serving)

    def shutting_down(self) -> None:
        """Every service NOT_SERVING from now on (a graceful stop: load balancers move away first)."""
        self.servicer.enter_graceful_shutdown()

    def add_to_server(self, server: grpc.Server) -> None:
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)


def reflected_services(with_health: bool = True) -> tuple[str, ...]:
    """Every service reflection lists: ours, health (when served) and reflection itself."""
    from grpc_reflection.v1alpha import reflection

    return (*SERVICES, *((health.SERVICE_NAME,) if with_health else ()), reflection.SERVICE_NAME)
