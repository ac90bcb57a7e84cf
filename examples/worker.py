"""A worker with two tasks and a schedule declared in code.

    python examples/worker.py            # against the cluster the CLI finds (./local-cluster/client.toml, ...)

Ctrl-C or SIGTERM drains it: no new runs, running ones finish.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftsched import Context, NonRetryable, Worker


@dataclass
class Report:
    day: str
    customer: int
    pages: int = 3


worker = Worker(queues=["examples"], concurrency=4)


@worker.task("report")
def report(payload: Report, ctx: Context) -> dict:
    """Writes one page at a time; a retry starts where the last attempt got to."""
    start = (ctx.last_heartbeat or {}).get("page", 0)
    for page in range(start, payload.pages):
        if ctx.cancelled.is_set():
            break
        print(f"customer {payload.customer}, {payload.day}: page {page + 1} of {payload.pages}", file=ctx.log)
        ctx.heartbeat({"page": page + 1})
    return {"customer": payload.customer, "pages": payload.pages}


@worker.task("greet")
def greet(payload: dict) -> str:
    name = payload.get("name")
    if not name:
        raise NonRetryable('no name to greet: give the payload {"name": ...}')
    return f"hello, {name}"


worker.schedule("examples-nightly-report", cron="30 2 * * *", tz="Europe/Berlin", task="report",
                queue="examples", payload={"day": "yesterday", "customer": 7})  # fmt: skip

if __name__ == "__main__":
    worker.run()
