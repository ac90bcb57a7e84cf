"""What the SDK sends and raises, without a network: job specs from keyword arguments, the error family
mapped from gRPC status codes, where the cluster is found, and the public names of ``raftsched``."""

from __future__ import annotations

import datetime as dt
import os

import grpc
import pytest

import raftsched
from raftsched.cluster.domain.errors import RaftschedError as Root
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.errors import ClusterUnreachable
from raftsched.sdk import errors, from_pb
from raftsched.sdk.connection import Connection
from raftsched.sdk.requests import create_job, list_runs, preview
from raftsched.sdk.schedules import same_spec, schedule_key
from raftsched.sdk.spec import build_spec, change_spec

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- specs


def test_create_job_arguments_make_the_spec_the_cli_would() -> None:
    spec = build_spec(
        "nightly",
        cron="30 2 * * *",
        tz="Europe/Berlin",
        type="report",
        payload={"day": "yesterday"},
        max_attempts=5,
        backoff="2s",
        timeout=dt.timedelta(minutes=5),
        concurrency="forbid",
        misfire="skip",
        history_limit=50,
    )
    assert (spec.name, spec.type, spec.queue, spec.payload) == ("nightly", "report", "default", b'{"day":"yesterday"}')
    assert (spec.cron.expression, spec.cron.timezone) == ("30 2 * * *", "Europe/Berlin")
    assert spec.retry.max_attempts == 5 and spec.retry.initial_backoff.seconds == 2
    assert spec.timeout.seconds == 300 and spec.history_limit == 50
    assert spec.concurrency == pb.CONCURRENCY_POLICY_FORBID and spec.misfire == pb.MISFIRE_POLICY_SKIP


def test_each_schedule_kind_and_its_refusals() -> None:
    assert build_spec("e", every="1h30m").every.seconds == 5400
    assert build_spec("a", after=90).after.seconds == 90
    at = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    assert build_spec("t", at=at).at.seconds == int(at.timestamp())
    assert build_spec("c", cron="* * * * *").cron.timezone == "UTC"
    with pytest.raises(TypeError, match="exactly one schedule"):
        build_spec("none")
    with pytest.raises(TypeError, match=r"exactly one schedule.*\(got every, cron\)"):
        build_spec("two", every="1s", cron="* * * * *")
    with pytest.raises(ValueError, match="tz='Europe/Berlin' applies only to cron="):
        build_spec("tz", every="1m", tz="Europe/Berlin")
    with pytest.raises(ValueError, match="naive datetime"):
        build_spec("naive", at=dt.datetime(2030, 1, 1))


def test_an_unknown_spec_field_is_a_type_error_naming_it_and_the_fields_there_are() -> None:
    with pytest.raises(TypeError, match=r"unknown job field 'retries'.*lease_ttl.*timeout"):
        build_spec("x", every="1m", retries=3)
    with pytest.raises(ValueError, match="concurrency='sometimes': give one of allow, forbid, replace"):
        build_spec("x", every="1m", concurrency="sometimes")
    with pytest.raises(TypeError, match="history_limit='5': not a whole number"):
        build_spec("x", every="1m", history_limit="5")
    with pytest.raises(TypeError, match="backoff: unknown key"):
        build_spec("x", every="1m", backoff={"start": "1s"})


def test_any_spec_field_by_name_including_messages_as_dicts() -> None:
    spec = build_spec("x", every="1m", retry={"max_attempts": 4, "max_backoff": "2m", "multiplier": 3.0}, lease_ttl="45s")
    assert spec.retry.max_attempts == 4 and spec.retry.max_backoff.seconds == 120 and spec.retry.multiplier == 3.0
    assert spec.lease_ttl.seconds == 45


def test_an_update_changes_only_what_is_given() -> None:
    spec = build_spec("x", cron="0 * * * *", tz="Europe/Paris", payload="p", timeout="1m")
    assert change_spec(spec, cron="5 * * * *").cron.timezone == "Europe/Paris"  # the zone stays
    changed = change_spec(spec, every="10s", payload=None)
    assert changed.WhichOneof("schedule") == "every" and changed.payload == b"" and changed.timeout.seconds == 60
    assert change_spec(spec, tz="UTC").cron.timezone == "UTC"
    with pytest.raises(ValueError, match="only to a cron schedule"):
        change_spec(changed, tz="UTC")


def test_requests_carry_an_idempotency_key_and_status_filters_by_name() -> None:
    req = create_job("x", every="1m")
    assert req.idempotency_key.startswith("sdk-") and req.idempotency_key != create_job("x", every="1m").idempotency_key
    assert create_job("x", "mine", every="1m").idempotency_key == "mine"
    assert list_runs("j", "failed", 10, "").status == pb.RUN_STATUS_FAILED
    assert list_runs("j", "DEAD_LETTER", 10, "").status == pb.RUN_STATUS_DEAD_LETTER
    with pytest.raises(ValueError, match="status='broken': give one of pending, leased"):
        list_runs("j", "broken", 10, "")
    assert preview(3, "2030-01-01T00:00:00Z", {"cron": "0 * * * *"}).count == 3


def test_declared_schedules_compare_with_the_clusters_defaults_filled_in() -> None:
    declared = build_spec("n", cron="30 2 * * *", type="report")
    stored = build_spec("n", cron="30 2 * * *", type="report", max_attempts=3, lease_ttl="30s", misfire="fire_all")
    assert same_spec(declared, stored)
    assert not same_spec(declared, change_spec(stored, cron="31 2 * * *"))
    assert schedule_key("nightly") == "raftsched.schedule/nightly"
    assert schedule_key("nightly", "j-1") == "raftsched.schedule/nightly/after/j-1"
    assert len(schedule_key("n" * 1000)) < 256


# ---------------------------------------------------------------- errors


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(
    "code, cls",
    [
        (grpc.StatusCode.NOT_FOUND, errors.NotFound),
        (grpc.StatusCode.INVALID_ARGUMENT, errors.InvalidArgument),
        (grpc.StatusCode.ALREADY_EXISTS, errors.AlreadyExists),
        (grpc.StatusCode.FAILED_PRECONDITION, errors.FailedPrecondition),
        (grpc.StatusCode.PERMISSION_DENIED, errors.PermissionDenied),
        (grpc.StatusCode.UNAUTHENTICATED, errors.Unauthenticated),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, errors.ResourceExhausted),
        (grpc.StatusCode.UNAVAILABLE, errors.Unavailable),
        (grpc.StatusCode.DEADLINE_EXCEEDED, errors.DeadlineExceeded),
        (grpc.StatusCode.INTERNAL, errors.RaftschedError),
    ],
)
def test_each_status_code_maps_to_its_error_with_the_nodes_message(code: grpc.StatusCode, cls: type) -> None:
    err = errors.from_rpc(FakeRpcError(code, "job  j-1\nnot found"))
    assert type(err) is cls
    assert isinstance(err, raftsched.RaftschedError) and isinstance(err, Root)
    assert err.message == "job j-1 not found"
    assert err.code == code.name and err.code == code
    assert str(err) == f"{code.name}: job j-1 not found"


def test_no_node_answering_is_unavailable_and_the_family_is_public() -> None:
    err = errors.from_rpc(ClusterUnreachable(["127.0.0.1:1"]))
    assert isinstance(err, raftsched.Unavailable) and "no node of the cluster answers at 127.0.0.1:1" in err.message
    timeout = errors.Timeout("run r has not ended", "r", "LEASED")
    assert isinstance(timeout, TimeoutError) and isinstance(timeout, raftsched.DeadlineExceeded)
    assert (timeout.run_id, timeout.last_status) == ("r", "LEASED")
    assert errors.from_item_status(pb.ItemStatus(code=6, message="key reused")).code == "ALREADY_EXISTS"
    with pytest.raises(raftsched.NotFound):
        with errors.translated():
            raise FakeRpcError(grpc.StatusCode.NOT_FOUND, "gone")


def test_raftsched_exports_the_public_api() -> None:
    for name in ("Client", "AsyncClient", "Worker", "NonRetryable", "RetryAfter", "Job", "Run", "Attempt", "Explanation"):
        assert name in raftsched.__all__ and getattr(raftsched, name) is not None
    for name in ("RaftschedError", "NotFound", "InvalidArgument", "AlreadyExists", "FailedPrecondition", "PermissionDenied"):
        assert issubclass(getattr(raftsched, name), raftsched.RaftschedError)
    for name in ("Unauthenticated", "ResourceExhausted", "Unavailable", "DeadlineExceeded"):
        assert issubclass(getattr(raftsched, name), raftsched.RaftschedError)
    assert isinstance(raftsched.__version__, str)


def test_answers_are_plain_objects_never_protobuf() -> None:
    run = pb.Run(run_id="j@1", job_id="j", status=pb.RUN_STATUS_SUCCEEDED, attempt=1, result=b'{"rows": 3}')
    run.attempts.add(attempt=1, outcome=pb.ATTEMPT_OUTCOME_SUCCEEDED, heartbeat_details=b'{"page": 2}')
    converted = from_pb.run(run)
    assert (converted.id, converted.status, converted.result, converted.terminal) == ("j@1", "SUCCEEDED", {"rows": 3}, True)
    assert converted.attempts[0].outcome == "SUCCEEDED" and converted.attempts[0].heartbeat == {"page": 2}
    assert converted.scheduled_time is None
    job = from_pb.job(pb.Job(job_id="j", spec=build_spec("n", cron="0 * * * *", payload={"a": 1}), status=pb.JOB_STATUS_PAUSED))
    assert (job.id, job.name, job.status, job.payload, job.spec.schedule.cron) == ("j", "n", "PAUSED", {"a": 1}, "0 * * * *")


# ---------------------------------------------------------------- where the cluster is


def test_the_cluster_is_found_as_the_command_line_finds_it(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path)
    monkeypatch.chdir(root)
    conf = os.path.join(root, "local-cluster")
    os.makedirs(conf)
    with open(os.path.join(conf, "client.toml"), "w", encoding="utf-8") as f:
        f.write('cluster = ["127.0.0.1:50071", "127.0.0.1:50072"]\noutput_dir = "../var/outputs"\n')
    found = Connection(config=os.path.join(conf, "client.toml")).resolve(env={})
    assert found.addresses == ["127.0.0.1:50071", "127.0.0.1:50072"]
    assert os.path.normpath(found.output_dir) == os.path.join(root, "var", "outputs")
    assert Connection().resolve(env={"RAFTSCHED_CLUSTER": "127.0.0.1:1,127.0.0.1:2"}).addresses == ["127.0.0.1:1", "127.0.0.1:2"]
    named = Connection(["127.0.0.1:9"], token="s3cret").resolve(env={"RAFTSCHED_TOKEN": "other"})
    assert named.addresses == ["127.0.0.1:9"] and named.security.token == "s3cret"
    assert Connection("127.0.0.1:9").resolve(env={"RAFTSCHED_TOKEN": "t"}).security.token == "t"
    # addresses named otherwise still learn where logs go from the client config found here, when it names them
    by_env = Connection().resolve(env={"RAFTSCHED_CLUSTER": "127.0.0.1:50072", "HOME": root})
    assert os.path.normpath(by_env.output_dir) == os.path.join(root, "var", "outputs")
    assert Connection("127.0.0.1:50071").resolve(env={"HOME": root}).output_dir == by_env.output_dir
    assert Connection("127.0.0.1:7").resolve(env={"HOME": root}).output_dir == ""


def test_a_token_that_would_travel_in_the_clear_or_a_missing_file_is_a_configuration_error() -> None:
    with pytest.raises(raftsched.ConfigurationError, match="refusing to send the bearer token without TLS"):
        Connection("10.1.2.3:50051", token="s3cret").resolve(env={})
    with pytest.raises(raftsched.ConfigurationError, match="cannot read the CA file /no/such/ca.pem"):
        Connection("127.0.0.1:1", ca_file="/no/such/ca.pem").resolve(env={})
    with pytest.raises(raftsched.ConfigurationError, match="cannot read /no/such.toml"):
        raftsched.Client(config="/no/such.toml")
