"""The SDK as a user's program uses it, run by the python of a venv with the wheel installed (not the checkout):
``python sdk_wheel_scenarios.py ADDRESSES OUTPUT_DIR`` runs every scenario and prints one JSON object of what
each saw; ``... ADDRESSES OUTPUT_DIR --slow-worker QUEUE`` serves a queue whose first attempt never ends (the
test SIGKILLs that process). Imports only ``raftsched`` and the standard library."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import threading
import time
import uuid
from typing import Any, Callable

import grpc

import raftsched
from raftsched import AsyncClient, Client, Context, NonRetryable, RetryAfter, Worker
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc


@dataclasses.dataclass
class Invoice:
    customer: int
    amount: float
    lines: list[str] = dataclasses.field(default_factory=list)


def _say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _wait(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError(f"no {what} within {timeout} s")


def _tasks(w: Worker) -> None:
    @w.task("invoice")
    def invoice(payload: Invoice, ctx: Context) -> dict:
        print(f"invoice for {payload.customer}", file=ctx.log)
        return {"customer": payload.customer, "total": payload.amount, "lines": len(payload.lines)}

    @w.task("resume")
    def resume(payload: dict, ctx: Context) -> dict:
        if ctx.attempt == 1:
            ctx.heartbeat({"page": 7})
            raise RuntimeError("stopped half way")
        return {"resumed_from": ctx.last_heartbeat}

    @w.task("refuse")
    def refuse(payload: dict) -> None:
        raise NonRetryable(f"no such customer {payload['customer']}")

    @w.task("later")
    def later() -> None:
        raise RetryAfter(3, "rate limited")

    @w.task("fetch")
    async def fetch(payload: dict, ctx: Context) -> dict:
        await asyncio.sleep(0.05)
        return {"thread": threading.current_thread().name, "got": payload}

    @w.task("slow")
    def slow(payload: dict, ctx: Context) -> dict:
        return {"attempt": ctx.attempt}


def _one_run(client: Client, queue: str, type: str, payload: Any, **spec: Any) -> raftsched.Run:
    _say(f"a run of {type}")
    job = client.create_job(f"{type}-{uuid.uuid4().hex[:8]}", every="1h", type=type, queue=queue, payload=payload, **spec)
    return client.wait_run(client.trigger_job(job.id).id, timeout=60)


def _attempt(a: raftsched.Attempt) -> dict:
    return {
        "outcome": a.outcome,
        "executor": a.executor_id,
        "lease": a.lease_id,
        "token": a.fencing_token,
        "leased": a.leased_at.timestamp() if a.leased_at else None,
        "finished": a.finished_at.timestamp() if a.finished_at else None,
        "heartbeat": a.heartbeat,
    }


def _run(run: raftsched.Run) -> dict:
    return {"status": run.status, "error": run.error, "result": run.result, "attempts": [_attempt(a) for a in run.attempts]}


def _late_completion(addresses: str, a: raftsched.Attempt) -> str:
    """CompleteRun with an expired attempt's lease and token, as its (killed) worker would have sent it."""
    with grpc.insecure_channel(addresses.split(",")[0]) as ch:
        req = pb.CompleteRunRequest(
            executor_id=a.executor_id, lease_id=a.lease_id, fencing_token=a.fencing_token, outcome=pb.OUTCOME_SUCCEEDED
        )
        try:
            pb_grpc.LeaseServiceStub(ch).CompleteRun(req, timeout=10)
        except grpc.RpcError as exc:
            return exc.code().name
    return "OK"


def scenarios(addresses: str, output_dir: str, slow_worker: Callable[[str], Any]) -> dict:
    queue = f"wheel-{uuid.uuid4().hex[:6]}"
    seen: dict[str, Any] = {}
    with Client(addresses) as client:
        _wait("command format 4", lambda: client.cluster_status().command_format >= 4)
        w = Worker(queues=[queue], concurrency=4, cluster=addresses, output_dir=output_dir, grace=5)
        _tasks(w)
        w.start()
        try:
            typed = _one_run(client, queue, "invoice", {"customer": 7, "amount": 12.5, "lines": ["a", "b"]})
            seen["typed"] = _run(typed) | {"log": client.get_run_output(typed.id).text}
            seen["bad_payload"] = _run(_one_run(client, queue, "invoice", {"customer": "seven", "amount": 1}, max_attempts=3))
            seen["checkpoint"] = _run(_one_run(client, queue, "resume", {}, max_attempts=2, backoff="1s"))
            seen["non_retryable"] = _run(_one_run(client, queue, "refuse", {"customer": 3}, max_attempts=3))
            seen["retry_after"] = _run(_one_run(client, queue, "later", None, max_attempts=2, backoff="1s"))
            seen["async"] = _run(_one_run(client, queue, "fetch", {"n": 1}))
        finally:
            w.stop()
        _say("two workers declare one schedule")
        seen["schedule_jobs"] = _two_workers_declare(client, addresses, output_dir)
        _say("AsyncClient and Client")
        seen["same_job"] = asyncio.run(_same_job(client, addresses))
        _say("a worker killed mid-run")
        seen["killed"] = _killed_worker(client, addresses, output_dir, slow_worker)
    return seen


def _two_workers_declare(client: Client, addresses: str, output_dir: str) -> int:
    name = f"nightly-{uuid.uuid4().hex[:8]}"
    workers = []
    for _ in range(2):
        w = Worker(queues=["wheel-sched"], cluster=addresses, output_dir=output_dir, grace=1)
        w.register("nightly", lambda: None)
        w.schedule(name, cron="30 2 * * *", tz="Europe/Berlin", task="nightly", payload={"day": "yesterday"})
        workers.append(w)
    starters = [threading.Thread(target=w.start) for w in workers]
    for t in starters:
        t.start()
    for t in starters:
        t.join(60)
    for w in workers:
        w.stop()
    return len([j for j in client.list_jobs(name_prefix=name) if j.name == name and j.status != "DELETED"])


async def _same_job(client: Client, addresses: str) -> bool:
    async with AsyncClient(addresses) as aclient:
        job = await aclient.create_job(f"async-{uuid.uuid4().hex[:8]}", every="1h", type="noop", queue="wheel-async")
        mine = client.get_job(job.id)
        back = await aclient.get_job(job.id)
        return mine.id == back.id == job.id and mine.spec == back.spec


def _killed_worker(client: Client, addresses: str, output_dir: str, slow_worker: Callable[[str], Any]) -> dict:
    queue = f"wheel-kill-{uuid.uuid4().hex[:6]}"
    job = client.create_job(
        f"slow-{uuid.uuid4().hex[:6]}", every="1h", type="slow", queue=queue, payload={}, lease_ttl="3s", backoff="1s"
    )
    run = client.trigger_job(job.id)
    proc = slow_worker(queue)
    try:
        leased = _wait("the first attempt leased", lambda: (r := client.get_run(run.id)).status == "LEASED" and r)
    finally:
        proc.kill()  # SIGKILL: no completion, no renewal
        proc.wait()
    w = Worker(queues=[queue], cluster=addresses, output_dir=output_dir, grace=5)
    _tasks(w)
    w.start()
    try:
        done = client.wait_run(run.id, timeout=60)
    finally:
        w.stop()
    seen = _run(done)
    seen["first_executor"] = leased.executor_id
    seen["late_completion"] = _late_completion(addresses, done.attempts[0])
    return seen


def _serve_slow(addresses: str, output_dir: str, queue: str) -> None:
    w = Worker(queues=[queue], cluster=addresses, output_dir=output_dir, grace=1)

    @w.task("slow")
    def slow(payload: dict, ctx: Context) -> None:
        time.sleep(600)  # renewed all along, until the process is killed

    w.run()


def main(argv: list[str]) -> int:
    addresses, output_dir = argv[0], argv[1]
    if argv[2:3] == ["--slow-worker"]:
        _serve_slow(addresses, output_dir, argv[3])
        return 0
    import subprocess

    def slow_worker(queue: str) -> subprocess.Popen[bytes]:
        # its output to this one's stderr: the test reads this one's stdout to its end
        return subprocess.Popen([sys.executable, __file__, addresses, output_dir, "--slow-worker", queue], stdout=sys.stderr)

    print(json.dumps(scenarios(addresses, output_dir, slow_worker), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
