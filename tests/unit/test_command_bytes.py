"""The log's bytes, pinned: every command kind encodes to exactly the bytes it always did.

A Raft log written by one version is replayed by the next, and a request's fingerprint is stored in the
state (``REQUESTS``): the encoding of each command, with and without each optional field, must never
change. The expected bytes and fingerprints below were written by the encoder they pin; a change to the
command table that changes one byte fails here, whatever the round trips say.
"""

from __future__ import annotations

import typing

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.model import (
    After,
    At,
    ConcurrencyPolicy,
    Cron,
    Every,
    JobSpec,
    Member,
    MisfirePolicy,
    RetryPolicy,
    TimeWindow,
)

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
SPEC_FULL = JobSpec(
    'n\u00e4m\u00e9 "q"',
    Cron("0 9 * * MON-FRI", "Europe/Berlin"),
    queue="q1",
    type="shell",
    payload=b"\x00\xff{}",
    retry=RetryPolicy(5, 250, 9_000, 1.5, 0.1),
    lease_ttl_ms=12_000,
    timeout_ms=60_000,
    concurrency=ConcurrencyPolicy.FORBID,
    misfire=MisfirePolicy.FIRE_ONCE,
    catchup_window_ms=3_600_000,
    history_limit=10,
    history_ttl_ms=86_400_000,
    failed_history_limit=7,
)
SPEC_PLAIN = JobSpec("n", Every(60_000))
#: every field of command format 5 set
SPEC_5 = JobSpec(
    "n", Cron("0 9 * * MON-FRI", "Europe/Berlin"), start_ms=T0, end_ms=T0 + 86_400_000, jitter_ms=5_000,
    skip_dates=("2026-12-25",), skip_windows=(TimeWindow(T0 + 1_000, T0 + 2_000),), extra_crons=(Cron("0 12 * * SAT", "UTC"),),
    max_runs=10, pause_after_failures=3, trigger_on_create=True, labels=(("team", "billing"),), pending_ttl_ms=60_000,
    priority=7, concurrency_key="db", concurrency_limit=2,
)  # fmt: skip

CASES: list[tuple[str, c.Command]] = [
    ("create_job_plain", c.CreateJob(T0, "j1", SPEC_PLAIN)),
    ("create_job_full", c.CreateJob(T0, "j1", SPEC_FULL, "key-1", "fp0123", 100, "req-1")),
    ("create_job_at", c.CreateJob(T0, "j-at", JobSpec("a", At(T0 + 5)), max_jobs=3)),
    ("create_job_after", c.CreateJob(T0, "j-after", JobSpec("f", After(1_000)), request_id="r")),
    ("update_job", c.UpdateJob(T0, "j1", SPEC_FULL)),
    ("update_job_rid", c.UpdateJob(T0, "j1", SPEC_PLAIN, "req-2")),
    ("pause_job", c.PauseJob(T0, "j1")),
    ("pause_job_rid", c.PauseJob(T0, "j1", "req-3")),
    ("resume_job", c.ResumeJob(T0, "j1")),
    ("resume_job_rid", c.ResumeJob(T0, "j1", "req-4")),
    ("delete_job", c.DeleteJob(T0, "j1")),
    ("delete_job_rid", c.DeleteJob(T0, "j1", "req-5")),
    ("trigger_job", c.TriggerJob(T0, "j1")),
    ("trigger_job_full", c.TriggerJob(T0, "j1", 50, "req-6")),
    ("cancel_run", c.CancelRun(T0, "j1@5")),
    ("cancel_run_rid", c.CancelRun(T0, "j1@5", "req-7")),
    ("retry_run", c.RetryRun(T0, "j1@5")),
    ("retry_run_full", c.RetryRun(T0, "j1@5", "alice", 10, "req-8")),
    ("fire", c.Fire(T0, (("a", 1), ("b", 2)), 100, 5_000)),
    ("fire_full", c.Fire(T0, (("a", 1),), 100, 5_000, 9, "n1", 7)),
    ("fire_empty", c.Fire(T0, ())),
    ("acquire", c.AcquireLeases(T0, "ex-1", ("default", "q2"), 10)),
    ("acquire_types", c.AcquireLeases(T0, "ex-1", ("default",), 500, ("shell", "http"))),
    ("renew", c.RenewLeases(T0, "ex-1", (("L5001", 5001), ("L7002", 7002)))),
    ("complete_ok", c.CompleteRun(T0, "L5001", 5001, True, b"\x00result", "", "s3://b/k", 0.25, "ex-1")),
    ("complete_old", c.CompleteRun(T0, "L5001", 5001, False, error="exit 2")),
    ("complete_draw", c.CompleteRun(T0, "L5001", 5001, False, b"", "boom \u2603", "", 0.1234567890123, "")),
    ("renew_details", c.RenewLeases(T0, "ex-1", (("L5001", 5001), ("L7002", 7002)), (("L7002", b'{"page":3}'),))),
    ("complete_verdict", c.CompleteRun(T0, "L5001", 5001, False, b"", "no such customer", "data:,", 0.5, "ex-1", True)),
    ("complete_retry_after", c.CompleteRun(T0, "L5001", 5001, False, b"", "rate limited", "", 0.75, "ex-1", False, 30_000)),
    ("expire", c.ExpireLeases(T0, (("L5001", 5001, 0.75), ("L5002", 5002, 0.0)))),
    ("grace", c.GraceLeases(T0, 2_000)),
    ("prune", c.PruneHistory(T0, 5_000)),
    ("barrier", c.Barrier(T0)),
    ("barrier_zero", c.Barrier(0)),
    ("node_info", c.NodeInfo(T0, "n1", "0.1.0", 1)),
    ("node_info_raft", c.NodeInfo(T0, "n1", "0.2.0", 3, "10.0.0.1:7001")),
    (
        "member_seed",
        c.SeedMembers(T0, (Member("n1", "10.0.0.1:7001", "10.0.0.1:50051", "10.0.0.1:8081"), Member("n2", "b:1", "b:2"))),
    ),
    ("member_add", c.AddMember(T0, Member("n4", "10.0.0.4:7001", "10.0.0.4:50051"))),
    ("member_remove", c.RemoveMember(T0, "n1")),
    ("member_done", c.FinishMemberChange(T0, "n4", "add")),
    ("cluster_format", c.SetClusterFormat(T0, 3)),
    ("create_job_schedules", c.CreateJob(T0, "j5", SPEC_5)),
    ("pause_job_until", c.PauseJob(T0, "j1", note="deploy", until_ms=T0 + 60_000)),
    ("trigger_job_payload", c.TriggerJob(T0, "j1", payload=b'{"n":1}')),
    ("backfill_job", c.BackfillJob(T0, "j1", T0 - 86_400_000, T0, 100)),
    ("expire_pending", c.ExpirePending(T0, ("j1@5", "j1@6"))),
]

#: what the encoder wrote for each case
BYTES: dict[str, bytes] = {
    "create_job_plain": b'{"op":"create_job","job_id":"j1","spec":{"name":"n","sched":{"k":"every","ms":60000},"queue":"default","type":"shell","payload":"","retry":{"max":3,"init":1000,"cap":60000,"mul":2.0,"jit":0.2},"ttl":30000,"timeout":0,"conc":"ALLOW","misfire":"FIRE_ALL","catchup":86400000,"hlimit":1000,"httl":604800000},"idem":"","fp":"","v":1,"now":1767225600000}',
    "create_job_full": b'{"op":"create_job","job_id":"j1","spec":{"name":"n\\u00e4m\\u00e9 \\"q\\"","sched":{"k":"cron","expr":"0 9 * * MON-FRI","tz":"Europe/Berlin"},"queue":"q1","type":"shell","payload":"AP97fQ==","retry":{"max":5,"init":250,"cap":9000,"mul":1.5,"jit":0.1},"ttl":12000,"timeout":60000,"conc":"FORBID","misfire":"FIRE_ONCE","catchup":3600000,"hlimit":10,"httl":86400000,"flimit":7},"idem":"key-1","fp":"fp0123","rid":"req-1","qj":100,"v":3,"now":1767225600000}',
    "create_job_at": b'{"op":"create_job","job_id":"j-at","spec":{"name":"a","sched":{"k":"at","ms":1767225600005},"queue":"default","type":"shell","payload":"","retry":{"max":3,"init":1000,"cap":60000,"mul":2.0,"jit":0.2},"ttl":30000,"timeout":0,"conc":"ALLOW","misfire":"FIRE_ALL","catchup":86400000,"hlimit":1000,"httl":604800000},"idem":"","fp":"","qj":3,"v":1,"now":1767225600000}',
    "create_job_after": b'{"op":"create_job","job_id":"j-after","spec":{"name":"f","sched":{"k":"after","ms":1000},"queue":"default","type":"shell","payload":"","retry":{"max":3,"init":1000,"cap":60000,"mul":2.0,"jit":0.2},"ttl":30000,"timeout":0,"conc":"ALLOW","misfire":"FIRE_ALL","catchup":86400000,"hlimit":1000,"httl":604800000},"idem":"","fp":"","rid":"r","v":3,"now":1767225600000}',
    "update_job": b'{"op":"update_job","job_id":"j1","spec":{"name":"n\\u00e4m\\u00e9 \\"q\\"","sched":{"k":"cron","expr":"0 9 * * MON-FRI","tz":"Europe/Berlin"},"queue":"q1","type":"shell","payload":"AP97fQ==","retry":{"max":5,"init":250,"cap":9000,"mul":1.5,"jit":0.1},"ttl":12000,"timeout":60000,"conc":"FORBID","misfire":"FIRE_ONCE","catchup":3600000,"hlimit":10,"httl":86400000,"flimit":7},"v":1,"now":1767225600000}',
    "update_job_rid": b'{"op":"update_job","job_id":"j1","spec":{"name":"n","sched":{"k":"every","ms":60000},"queue":"default","type":"shell","payload":"","retry":{"max":3,"init":1000,"cap":60000,"mul":2.0,"jit":0.2},"ttl":30000,"timeout":0,"conc":"ALLOW","misfire":"FIRE_ALL","catchup":86400000,"hlimit":1000,"httl":604800000},"rid":"req-2","v":3,"now":1767225600000}',
    "pause_job": b'{"op":"pause_job","job_id":"j1","v":1,"now":1767225600000}',
    "pause_job_rid": b'{"op":"pause_job","job_id":"j1","rid":"req-3","v":3,"now":1767225600000}',
    "resume_job": b'{"op":"resume_job","job_id":"j1","v":1,"now":1767225600000}',
    "resume_job_rid": b'{"op":"resume_job","job_id":"j1","rid":"req-4","v":3,"now":1767225600000}',
    "delete_job": b'{"op":"delete_job","job_id":"j1","v":1,"now":1767225600000}',
    "delete_job_rid": b'{"op":"delete_job","job_id":"j1","rid":"req-5","v":3,"now":1767225600000}',
    "trigger_job": b'{"op":"trigger_job","job_id":"j1","v":1,"now":1767225600000}',
    "trigger_job_full": b'{"op":"trigger_job","job_id":"j1","rid":"req-6","qp":50,"v":3,"now":1767225600000}',
    "cancel_run": b'{"op":"cancel_run","run_id":"j1@5","v":1,"now":1767225600000}',
    "cancel_run_rid": b'{"op":"cancel_run","run_id":"j1@5","rid":"req-7","v":3,"now":1767225600000}',
    "retry_run": b'{"op":"retry_run","run_id":"j1@5","by":"","v":3,"now":1767225600000}',
    "retry_run_full": b'{"op":"retry_run","run_id":"j1@5","by":"alice","rid":"req-8","qp":10,"v":3,"now":1767225600000}',
    "fire": b'{"op":"fire","items":[["a",1],["b",2]],"look":100,"mis":5000,"v":1,"now":1767225600000}',
    "fire_full": b'{"op":"fire","items":[["a",1]],"look":100,"mis":5000,"qp":9,"node":"n1","term":7,"v":1,"now":1767225600000}',
    "fire_empty": b'{"op":"fire","items":[],"look":0,"mis":5000,"v":1,"now":1767225600000}',
    "acquire": b'{"op":"acquire","exec":"ex-1","queues":["default","q2"],"max":10,"v":1,"now":1767225600000}',
    "acquire_types": b'{"op":"acquire","exec":"ex-1","queues":["default"],"max":500,"types":["shell","http"],"v":1,"now":1767225600000}',
    "renew": b'{"op":"renew","exec":"ex-1","leases":[["L5001",5001],["L7002",7002]],"v":1,"now":1767225600000}',
    "complete_ok": b'{"op":"complete","lease":"L5001","token":5001,"ok":true,"result":"AHJlc3VsdA==","error":"","log":"s3://b/k","draw":0.25,"exec":"ex-1","v":1,"now":1767225600000}',
    "complete_old": b'{"op":"complete","lease":"L5001","token":5001,"ok":false,"result":"","error":"exit 2","log":"","draw":0.5,"v":1,"now":1767225600000}',
    "complete_draw": b'{"op":"complete","lease":"L5001","token":5001,"ok":false,"result":"","error":"boom \\u2603","log":"","draw":0.1234567890123,"exec":"","v":1,"now":1767225600000}',
    "renew_details": b'{"op":"renew","exec":"ex-1","leases":[["L5001",5001],["L7002",7002]],"hb":[["L7002","eyJwYWdlIjozfQ=="]],"v":4,"now":1767225600000}',
    "complete_verdict": b'{"op":"complete","lease":"L5001","token":5001,"ok":false,"result":"","error":"no such customer","log":"data:,","draw":0.5,"exec":"ex-1","nr":true,"v":4,"now":1767225600000}',
    "complete_retry_after": b'{"op":"complete","lease":"L5001","token":5001,"ok":false,"result":"","error":"rate limited","log":"","draw":0.75,"exec":"ex-1","ra":30000,"v":4,"now":1767225600000}',
    "expire": b'{"op":"expire","leases":[["L5001",5001,0.75],["L5002",5002,0.0]],"v":1,"now":1767225600000}',
    "grace": b'{"op":"grace","grace":2000,"v":1,"now":1767225600000}',
    "prune": b'{"op":"prune","limit":5000,"v":1,"now":1767225600000}',
    "barrier": b'{"op":"barrier","v":1,"now":1767225600000}',
    "barrier_zero": b'{"op":"barrier","v":1,"now":0}',
    "node_info": b'{"op":"node_info","node":"n1","ver":"0.1.0","fmt":1,"v":1,"now":1767225600000}',
    "node_info_raft": b'{"op":"node_info","node":"n1","ver":"0.2.0","fmt":3,"raft":"10.0.0.1:7001","v":1,"now":1767225600000}',
    "member_seed": b'{"op":"member_seed","members":[["n1","10.0.0.1:7001","10.0.0.1:50051","10.0.0.1:8081"],["n2","b:1","b:2",""]],"v":2,"now":1767225600000}',
    "member_add": b'{"op":"member_add","member":["n4","10.0.0.4:7001","10.0.0.4:50051",""],"v":2,"now":1767225600000}',
    "member_remove": b'{"op":"member_remove","node":"n1","v":2,"now":1767225600000}',
    "member_done": b'{"op":"member_done","node":"n4","action":"add","v":2,"now":1767225600000}',
    "cluster_format": b'{"op":"cluster_format","fmt":3,"v":2,"now":1767225600000}',
    "create_job_schedules": b'{"op":"create_job","job_id":"j5","spec":{"name":"n","sched":{"k":"cron","expr":"0 9 * * MON-FRI","tz":"Europe/Berlin"},"queue":"default","type":"shell","payload":"","retry":{"max":3,"init":1000,"cap":60000,"mul":2.0,"jit":0.2},"ttl":30000,"timeout":0,"conc":"ALLOW","misfire":"FIRE_ALL","catchup":86400000,"hlimit":1000,"httl":604800000,"start":1767225600000,"end":1767312000000,"jit":5000,"sdates":["2026-12-25"],"swin":[[1767225601000,1767225602000]],"crons":[{"expr":"0 12 * * SAT","tz":"UTC"}],"maxr":10,"paf":3,"toc":true,"labels":{"team":"billing"},"pttl":60000,"prio":7,"ckey":"db","climit":2},"idem":"","fp":"","v":5,"now":1767225600000}',
    "pause_job_until": b'{"op":"pause_job","job_id":"j1","note":"deploy","until":1767225660000,"v":5,"now":1767225600000}',
    "trigger_job_payload": b'{"op":"trigger_job","job_id":"j1","payload":"eyJuIjoxfQ==","v":5,"now":1767225600000}',
    "backfill_job": b'{"op":"backfill_job","job_id":"j1","from":1767139200000,"to":1767225600000,"qp":100,"v":5,"now":1767225600000}',
    "expire_pending": b'{"op":"expire_pending","runs":["j1@5","j1@6"],"v":5,"now":1767225600000}',
}

#: each case's request fingerprint (stored with an answered request_id)
FINGERPRINTS: dict[str, str] = {
    "create_job_plain": "2ee9a87249f8f0f8c8118793d8c7c007",
    "create_job_full": "168d9749d7148229760b4122e94e65bd",
    "create_job_at": "09b8d0b6ac4ed2fe342cbc5bafe6fbb1",
    "create_job_after": "472ddc510d402c3dd6cc178968a946c7",
    "update_job": "d2dfceae4b4fc0d2d98950ecc023f4c7",
    "update_job_rid": "a023adac67a4e0f98711fcfff4a0bd0f",
    "pause_job": "73150e5bb35b9d71c72c4f08bbd3ad68",
    "pause_job_rid": "73150e5bb35b9d71c72c4f08bbd3ad68",
    "resume_job": "aadef23d97579132aca45fd5c41c968d",
    "resume_job_rid": "aadef23d97579132aca45fd5c41c968d",
    "delete_job": "39dbe7e66929e52fc3fce38464a7fcf5",
    "delete_job_rid": "39dbe7e66929e52fc3fce38464a7fcf5",
    "trigger_job": "164c1af7f066421d99f3dc9409200151",
    "trigger_job_full": "164c1af7f066421d99f3dc9409200151",
    "cancel_run": "4548fc89a18a1ecb89e158a9726ba48f",
    "cancel_run_rid": "4548fc89a18a1ecb89e158a9726ba48f",
    "retry_run": "a482360218132c9c2d387c937a919b79",
    "retry_run_full": "a482360218132c9c2d387c937a919b79",
    "fire": "f41095f0e42d79b75afef1d4cc2f760c",
    "fire_full": "532f305170a8802478bfe027d56986da",
    "fire_empty": "adfce76b627dc0089038375d637c7c09",
    "acquire": "71efa0a69d89e73428455ae23eeb4a24",
    "acquire_types": "f902d243815bf57ee8ee58dca7de50b0",
    "renew": "ae19187475e29a042dc8008fdbd27215",
    "complete_ok": "5e1900e33df51c61b84a321d16957c2a",
    "renew_details": "22d175033b25a147ee2e1bc8cea5015e",
    "complete_verdict": "4c65044e6bfb35cc389582b23d4a4c87",
    "complete_retry_after": "5c85d78cc4b1cee6b8093bbb88dab5a6",
    "complete_old": "76d4885201c3a4443c167acf91b71fe9",
    "complete_draw": "d8d6352068ad5d3c18b2d73dd2495617",
    "expire": "e20f7335a4460eeb0f02a495dad25291",
    "grace": "980c187b6318bcd965850268607cbff8",
    "prune": "e260ede5c912a155403f0391a89ee338",
    "barrier": "840f9019006794b850acba48682e4795",
    "barrier_zero": "840f9019006794b850acba48682e4795",
    "node_info": "7f3ab8f02b589679401ebfe6cab6c62b",
    "node_info_raft": "83ee2a83cc3c99f97852c53479848ea8",
    "member_seed": "1064d79bd966dde74af6138c1aac21fa",
    "member_add": "16e305ec97c25b9ce642bc756df2effd",
    "member_remove": "f8b6d0c6248243f38c4e978957030167",
    "member_done": "b2fc2fa3dd44d5520671da76aa96743c",
    "cluster_format": "eed1558ab6d3bfc82fd86470061ed5af",
    "create_job_schedules": "f2276f1d9fdd3d5903eb2c2dd4736142",
    "pause_job_until": "52b4729532fea52c1efb187e02d90ce0",
    "trigger_job_payload": "3ff5ba909be7339696e6e71e7cad3381",
    "backfill_job": "9855f06429e637d14abee36c7b7cb2b8",
    "expire_pending": "1e9ab62d8e6771bbdebca1c4c896766b",
}


@pytest.mark.parametrize(("name", "cmd"), CASES, ids=[name for name, _ in CASES])
def test_each_command_encodes_to_the_bytes_it_always_did(name: str, cmd: c.Command) -> None:
    assert c.encode(cmd) == BYTES[name]


@pytest.mark.parametrize(("name", "cmd"), CASES, ids=[name for name, _ in CASES])
def test_the_pinned_bytes_decode_to_the_command(name: str, cmd: c.Command) -> None:
    assert c.decode(BYTES[name]) == cmd


@pytest.mark.parametrize(("name", "cmd"), CASES, ids=[name for name, _ in CASES])
def test_each_request_fingerprint_is_the_one_it_always_was(name: str, cmd: c.Command) -> None:
    assert c.request_fingerprint(cmd) == FINGERPRINTS[name]


def test_the_cases_cover_every_command_kind() -> None:
    assert {type(cmd) for _, cmd in CASES} == set(typing.get_args(c.Command))
