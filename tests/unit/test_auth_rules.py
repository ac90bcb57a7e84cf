"""The authorization core of rpc/server/auth.py, without a network: the role table for every RPC,
queue and type restrictions, the executor id rule, what a request touches, and the interceptor's check."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from raftsched.cluster.domain.errors import Unavailable
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.server import tokens as tokens_module
from raftsched.rpc.server.auth import (
    Access,
    AuthInterceptor,
    access_of,
    bearer_token,
    bind_executor,
    decide,
    is_restricted,
    may_act_as,
    method_kind,
)
from raftsched.rpc.server.tokens import Token, TokenTable, token_digest

pytestmark = pytest.mark.unit

# the role table of docs/config.md, written out independently of the code
READER = {
    "GetJob",
    "ListJobs",
    "GetRun",
    "ListRuns",
    "GetRunOutput",
    "WatchRuns",
    "PreviewSchedule",
    "ExplainRun",
    "GetClusterStatus",
}
SUBMITTER = READER | {
    "CreateJob",
    "CreateJobs",
    "UpdateJob",
    "PauseJob",
    "ResumeJob",
    "DeleteJob",
    "TriggerJob",
    "CancelRun",
    "RetryRun",
    "BackfillJob",
}
EXECUTOR = {"AcquireLease", "RenewLease", "CompleteRun", "CompleteRuns"}
#: what any valid token may ask, whatever its roles
ANY = {"WhoAmI"}
EXPECTED = {"reader": READER | ANY, "submitter": SUBMITTER | ANY, "executor": EXECUTOR | ANY}


def every_rpc() -> list[str]:
    """Every method of every service in the schema, and the ones the contract names that a later
    schema adds (ExplainRun, RetryRun)."""
    names = {m.name for s in pb.DESCRIPTOR.services_by_name.values() for m in s.methods}
    return sorted(names | {"ExplainRun", "RetryRun"})


def tok(
    name: str = "t", roles: tuple[str, ...] = ("reader",), queues: tuple[str, ...] = (), types: tuple[str, ...] = ()
) -> Token:
    return Token(name, token_digest(f"secret-of-{name}"), frozenset(roles), frozenset(queues), frozenset(types))


def test_the_schema_has_the_rpcs_the_table_names() -> None:
    rpcs = set(every_rpc())
    assert READER | SUBMITTER | EXECUTOR | {"AddNode", "RemoveNode"} <= rpcs


@pytest.mark.parametrize("method", every_rpc())
@pytest.mark.parametrize("role", ["reader", "submitter", "executor", "admin"])
def test_every_rpc_for_every_role(method: str, role: str) -> None:
    allowed = role == "admin" or method in EXPECTED[role]
    why = decide(tok("carol", (role,)), method, Access())
    if allowed:
        assert why is None
    else:
        assert why is not None and "'carol'" in why and method in why and "role" in why


@pytest.mark.parametrize("method", ["AddNode", "RemoveNode", "SomeFutureRpc"])
def test_only_admin_may_change_membership_or_call_what_the_table_does_not_name(method: str) -> None:
    assert method_kind(method) == "admin"
    for role in ("reader", "submitter", "executor"):
        assert "needs the admin role" in (decide(tok("x", (role,)), method, Access()) or "")
    assert decide(tok("root", ("admin",)), method, Access()) is None


def test_any_token_may_ask_who_it_is_whatever_its_roles() -> None:
    assert method_kind("WhoAmI") == "any"
    for roles in (("reader",), ("submitter",), ("executor",), ("admin",), ("executor", "reader")):
        assert decide(tok("dave", roles, queues=("q",), types=("t",)), "WhoAmI", Access()) is None


def test_roles_add_up() -> None:
    both = tok("worker", ("executor", "reader"))
    assert decide(both, "GetClusterStatus", Access()) is None
    assert decide(both, "AcquireLease", Access(queues=("q",), executor_ids=("worker",))) is None
    assert decide(both, "CreateJob", Access(queues=("q",), types=("shell",))) is not None


# ---------------------------------------------------------------- restrictions


def test_a_submitter_limited_to_a_queue() -> None:
    alice = tok("alice", ("submitter",), queues=("reports",))
    assert decide(alice, "CreateJob", Access(queues=("reports",), types=("shell",))) is None
    why = decide(alice, "CreateJob", Access(queues=("default",), types=("shell",)))
    assert why is not None and "'alice'" in why and "'default'" in why and "reports" in why
    # a batch with one item outside is refused as a whole, naming that queue
    assert "'billing'" in (decide(alice, "CreateJobs", Access(queues=("reports", "billing", "reports"))) or "")
    # reads are not restricted
    assert decide(alice, "ListJobs", Access(queues=("default",))) is None


def test_a_submitter_limited_to_types() -> None:
    bob = tok("bob", ("submitter",), types=("report", "noop"))
    assert decide(bob, "UpdateJob", Access(queues=("any",), types=("report", "noop"))) is None
    why = decide(bob, "UpdateJob", Access(queues=("any",), types=("report", "shell")))
    assert why is not None and "'bob'" in why and "'shell'" in why and "type" in why


def test_an_executor_limited_to_queues_is_not_limited_by_types() -> None:
    ex = tok("w", ("executor",), queues=("reports",), types=("noop",))
    assert decide(ex, "AcquireLease", Access(queues=("reports",), types=("shell",), executor_ids=("w",))) is None
    why = decide(ex, "CompleteRun", Access(queues=("default",), executor_ids=("w",)))
    assert why is not None and "'default'" in why and "'w'" in why


@pytest.mark.parametrize(
    ("executor_id", "ok"),
    [("w1", True), ("w1/host-3", True), ("w1/a/b", True), ("w1x", False), ("w10", False), ("w2", False), ("x/w1", False)],
)
def test_the_executor_id_rule(executor_id: str, ok: bool) -> None:
    assert may_act_as("w1", executor_id) is ok
    why = decide(tok("w1", ("executor",)), "RenewLease", Access(executor_ids=(executor_id,)))
    assert (why is None) is ok
    if not ok:
        assert why is not None and repr(executor_id) in why and "'w1/<suffix>'" in why


def test_admin_may_act_as_any_executor_and_use_any_queue() -> None:
    root = tok("root", ("admin",), queues=("q",))
    assert decide(root, "CompleteRuns", Access(queues=("other",), executor_ids=("someone",))) is None
    assert not is_restricted(root, "CreateJob")


def test_a_lookup_is_needed_only_for_restricted_writes() -> None:
    assert is_restricted(tok("a", ("submitter",), queues=("q",)), "PauseJob")
    assert is_restricted(tok("a", ("submitter",), types=("t",)), "CancelRun")
    assert not is_restricted(tok("a", ("submitter",)), "PauseJob")
    assert not is_restricted(tok("a", ("submitter",), queues=("q",)), "GetJob")
    assert is_restricted(tok("e", ("executor",), queues=("q",)), "CompleteRun")
    assert not is_restricted(tok("e", ("executor",), types=("t",)), "CompleteRun")


# ------------------------------------------------------------ what a call touches


class FakeLookup:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def job(self, job_id: str) -> tuple[str, str] | None:
        self.calls.append(("job", job_id))
        return {"j-1": ("billing", "http")}.get(job_id)

    def run(self, run_id: str) -> tuple[str, str] | None:
        self.calls.append(("run", run_id))
        return {"j-1@5": ("billing", "http")}.get(run_id)

    def lease_queues(self, lease_ids: list[str]) -> list[str]:
        self.calls.append(("leases", tuple(lease_ids)))
        return sorted({{"l-1": "billing", "l-2": "reports"}[i] for i in lease_ids if i in ("l-1", "l-2")})


def test_a_spec_without_queue_or_type_is_the_default_queue_and_shell() -> None:
    assert access_of("CreateJob", pb.CreateJobRequest(spec=pb.JobSpec(name="x")), None) == Access(("default",), ("shell",))
    batch = pb.CreateJobsRequest(
        jobs=[pb.CreateJobRequest(spec=pb.JobSpec(queue="a", type="noop")), pb.CreateJobRequest(spec=pb.JobSpec(queue="b"))]
    )
    assert access_of("CreateJobs", batch, None) == Access(("a", "b"), ("noop", "shell"))


def test_calls_naming_ids_touch_what_the_state_says() -> None:
    look = FakeLookup()
    update = pb.UpdateJobRequest(job_id="j-1", spec=pb.JobSpec(queue="reports", type="noop"))
    assert access_of("UpdateJob", update, look) == Access(("reports", "billing"), ("noop", "http"))
    for method in ("PauseJob", "ResumeJob", "DeleteJob", "TriggerJob", "BackfillJob"):
        request = getattr(pb, f"{method}Request")(job_id="j-1")
        assert access_of(method, request, look) == Access(("billing",), ("http",))
    assert access_of("CancelRun", pb.CancelRunRequest(run_id="j-1@5"), look) == Access(("billing",), ("http",))
    assert access_of("PauseJob", pb.PauseJobRequest(job_id="j-unknown"), look) == Access()  # the call answers NOT_FOUND
    renew = pb.RenewLeaseRequest(executor_id="w", leases=[pb.LeaseRef(lease_id="l-1"), pb.LeaseRef(lease_id="l-2")])
    assert access_of("RenewLease", renew, look) == Access(("billing", "reports"), (), ("w",))
    assert access_of("CompleteRuns", pb.CompleteRunsRequest(runs=[pb.CompleteRunRequest(lease_id="l-2")]), look).queues == (
        "reports",
    )
    look.calls.clear()
    assert access_of("PauseJob", pb.PauseJobRequest(job_id="j-1"), None) == Access()
    assert look.calls == []


def test_acquire_touches_its_queues_and_names_its_executor() -> None:
    req = pb.AcquireLeaseRequest(executor_id="w/1", queues=["a", "b"])
    assert access_of("AcquireLease", req, None) == Access(("a", "b"), (), ("w/1",))


def test_the_token_names_an_executor_that_names_none() -> None:
    w = tok("w", ("executor",))
    empty, named = pb.AcquireLeaseRequest(queues=["q"]), pb.RenewLeaseRequest(executor_id="w/2")
    bind_executor("AcquireLease", empty, w)
    bind_executor("RenewLease", named, w)
    assert empty.executor_id == "w" and named.executor_id == "w/2"
    job = pb.CreateJobRequest(spec=pb.JobSpec(name="untouched"))
    bind_executor("CreateJob", job, w)
    assert job.spec.name == "untouched"


@pytest.mark.parametrize(
    ("metadata", "token"),
    [
        ([("authorization", "Bearer abc")], "abc"),
        ([("authorization", "bearer  abc ")], "abc"),
        ([("x-other", "1"), ("authorization", "Bearer t-2")], "t-2"),
        ([("authorization", "Basic abc")], ""),
        ([("authorization", "abc")], ""),
        ([], ""),
    ],
)
def test_bearer_token(metadata: list[tuple[str, str]], token: str) -> None:
    assert bearer_token(_metadata(metadata)) == token


class _Entry:
    def __init__(self, key: str, value: str) -> None:
        self.key, self.value = key, value


def _metadata(pairs: list[tuple[str, str]]) -> list[_Entry]:
    return [_Entry(k, v) for k, v in pairs]


# ----------------------------------------------------------------- the check


def _interceptor(lookup: Any = None) -> AuthInterceptor:
    table = TokenTable(
        [
            Token("root", token_digest("s-root"), frozenset({"admin"})),
            Token("viewer", token_digest("s-viewer"), frozenset({"reader"})),
            Token("alice", token_digest("s-alice"), frozenset({"submitter"}), frozenset({"reports"})),
        ]
    )
    return AuthInterceptor(table, lookup or FakeLookup())


def _bearer(secret: str) -> list[_Entry]:
    return _metadata([("authorization", f"Bearer {secret}")])


def test_check_no_token_and_unknown_token_are_unauthenticated() -> None:
    check = _interceptor().check
    code, message = check("GetJob", pb.GetJobRequest(job_id="j"), []) or (None, "")
    assert code == grpc.StatusCode.UNAUTHENTICATED and "Bearer" in message
    code, message = check("GetJob", pb.GetJobRequest(job_id="j"), _bearer("s-nobody")) or (None, "")
    assert code == grpc.StatusCode.UNAUTHENTICATED and "tokens_file" in message and "s-nobody" not in message


def test_check_role_and_queue() -> None:
    check = _interceptor().check
    assert check("GetJob", pb.GetJobRequest(job_id="j"), _bearer("s-viewer")) is None
    code, message = check("CreateJob", pb.CreateJobRequest(spec=pb.JobSpec(queue="reports")), _bearer("s-viewer")) or (None, "")
    assert code == grpc.StatusCode.PERMISSION_DENIED and "'viewer'" in message
    assert check("CreateJob", pb.CreateJobRequest(spec=pb.JobSpec(queue="reports")), _bearer("s-alice")) is None
    code, message = check("CreateJob", pb.CreateJobRequest(spec=pb.JobSpec()), _bearer("s-alice")) or (None, "")
    assert code == grpc.StatusCode.PERMISSION_DENIED and "'default'" in message
    code, _ = check("PauseJob", pb.PauseJobRequest(job_id="j-1"), _bearer("s-alice")) or (None, "")
    assert code == grpc.StatusCode.PERMISSION_DENIED  # j-1 is in billing
    assert check("AddNode", pb.AddNodeRequest(id="n4"), _bearer("s-root")) is None


def test_a_failed_lookup_answers_with_its_own_status() -> None:
    class Down(FakeLookup):
        def job(self, job_id: str) -> tuple[str, str] | None:
            raise Unavailable("no leader; retry")

    code, message = _interceptor(Down()).check("PauseJob", pb.PauseJobRequest(job_id="j-1"), _bearer("s-alice")) or (None, "")
    assert code == grpc.StatusCode.UNAVAILABLE and "retry" in message


def test_tokens_are_compared_in_constant_time_against_every_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = tokens_module.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(tokens_module.hmac, "compare_digest", spy)
    table = TokenTable([tok("first"), tok("second"), tok("third")])
    assert table.find("secret-of-first") == table.tokens[0]  # found first, all three compared
    assert len(seen) == 3 and all(a == token_digest("secret-of-first") for a, _ in seen)
    seen.clear()
    assert table.find("nobody's") is None
    assert [b for _, b in seen] == [t.digest for t in table.tokens]
