"""The generated gRPC code is fresh, and the services match the public contract (docs/api.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[2]
GEN_PROTOS = REPO_ROOT / "scripts" / "gen_protos.py"

# RPC name -> (request message, response message, server-streaming), as docs/api.md lists them.
EXPECTED_SERVICES: dict[str, dict[str, tuple[str, str, bool]]] = {
    "JobService": {
        "CreateJob": ("CreateJobRequest", "Job", False),
        "CreateJobs": ("CreateJobsRequest", "CreateJobsResponse", False),
        "GetJob": ("GetJobRequest", "Job", False),
        "ListJobs": ("ListJobsRequest", "ListJobsResponse", False),
        "UpdateJob": ("UpdateJobRequest", "Job", False),
        "PauseJob": ("PauseJobRequest", "Job", False),
        "ResumeJob": ("ResumeJobRequest", "Job", False),
        "DeleteJob": ("DeleteJobRequest", "Job", False),
        "TriggerJob": ("TriggerJobRequest", "Run", False),
        "BackfillJob": ("BackfillJobRequest", "BackfillJobResponse", False),
        "GetRun": ("GetRunRequest", "Run", False),
        "ListRuns": ("ListRunsRequest", "ListRunsResponse", False),
        "CancelRun": ("CancelRunRequest", "Run", False),
        "RetryRun": ("RetryRunRequest", "Run", False),
        "ExplainRun": ("ExplainRunRequest", "RunExplanation", False),
        "GetRunOutput": ("GetRunOutputRequest", "RunOutput", False),
        "WatchRuns": ("WatchRunsRequest", "RunEvent", True),
        "PreviewSchedule": ("PreviewScheduleRequest", "PreviewScheduleResponse", False),
    },
    "LeaseService": {
        "AcquireLease": ("AcquireLeaseRequest", "AcquireLeaseResponse", False),
        "RenewLease": ("RenewLeaseRequest", "RenewLeaseResponse", False),
        "CompleteRun": ("CompleteRunRequest", "CompleteRunResponse", False),
        "CompleteRuns": ("CompleteRunsRequest", "CompleteRunsResponse", False),
    },
    "ClusterService": {
        "GetClusterStatus": ("GetClusterStatusRequest", "ClusterStatus", False),
        "AddNode": ("AddNodeRequest", "ClusterStatus", False),
        "RemoveNode": ("RemoveNodeRequest", "ClusterStatus", False),
        "Backup": ("BackupRequest", "BackupChunk", True),
        "WhoAmI": ("WhoAmIRequest", "WhoAmIResponse", False),
    },
}


def test_generated_code_is_fresh() -> None:
    """Fails when scheduler.proto changed but scripts/gen_protos.py was not re-run."""
    proc = subprocess.run(
        [sys.executable, str(GEN_PROTOS), "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"scripts/gen_protos.py --check exited {proc.returncode}; "
        f"run `python scripts/gen_protos.py` and commit the result.\n"
        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )


def test_services_have_exactly_the_contract_rpcs() -> None:
    from raftsched.protos.raftsched.v1 import scheduler_pb2

    services = scheduler_pb2.DESCRIPTOR.services_by_name
    assert set(services) == set(EXPECTED_SERVICES)
    assert scheduler_pb2.DESCRIPTOR.package == "raftsched.v1"

    # The full set of RPC names of each service, spelled out.
    assert {m.name for m in services["JobService"].methods} == {
        "CreateJob",
        "CreateJobs",
        "GetJob",
        "ListJobs",
        "UpdateJob",
        "PauseJob",
        "ResumeJob",
        "DeleteJob",
        "TriggerJob",
        "BackfillJob",
        "GetRun",
        "ListRuns",
        "CancelRun",
        "RetryRun",
        "ExplainRun",
        "GetRunOutput",
        "WatchRuns",
        "PreviewSchedule",
    }
    assert {m.name for m in services["LeaseService"].methods} == {
        "AcquireLease",
        "RenewLease",
        "CompleteRun",
        "CompleteRuns",
    }
    assert {m.name for m in services["ClusterService"].methods} == {
        "GetClusterStatus",
        "AddNode",
        "RemoveNode",
        "Backup",  # admin: the snapshot `raftsched cluster backup FILE` saves
        "WhoAmI",  # any valid token: its own name, roles and limits
    }

    # And their signatures.
    for service_name, rpcs in EXPECTED_SERVICES.items():
        methods = {m.name: m for m in services[service_name].methods}
        assert set(methods) == set(rpcs), service_name
        for rpc, (request, response, streaming) in rpcs.items():
            method = methods[rpc]
            assert method.input_type.full_name == f"raftsched.v1.{request}", rpc
            assert method.output_type.full_name == f"raftsched.v1.{response}", rpc
            assert method.server_streaming is streaming, rpc
            assert method.client_streaming is False, rpc
