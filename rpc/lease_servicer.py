"""LeaseService: executors lease runs. Until the executor issue lands, every RPC answers UNIMPLEMENTED."""

from __future__ import annotations

import grpc

from protos.raftsched.v1 import scheduler_pb2 as pb
from protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc

_NOT_YET = "leases are not available in this version yet: runs stay PENDING until executors can lease them"


class LeaseServicer(pb_grpc.LeaseServiceServicer):
    def AcquireLease(self, request: pb.AcquireLeaseRequest, context: grpc.ServicerContext) -> pb.AcquireLeaseResponse:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, _NOT_YET)

    def RenewLease(self, request: pb.RenewLeaseRequest, context: grpc.ServicerContext) -> pb.RenewLeaseResponse:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, _NOT_YET)

    def CompleteRun(self, request: pb.CompleteRunRequest, context: grpc.ServicerContext) -> pb.CompleteRunResponse:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, _NOT_YET)
