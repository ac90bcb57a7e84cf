"""Create a job, run it once now, and wait for its result.

python examples/client.py [NAME]     # with examples/worker.py running
"""

from __future__ import annotations

import sys

from raftsched import Client


def main(name: str = "Ada") -> int:
    with Client() as client:
        job = client.create_job(
            f"examples-greet-{name}", every="1d", type="greet", queue="examples", payload={"name": name},
            idempotency_key=f"examples-greet-{name}",  # run it twice: still one job
        )  # fmt: skip
        run = client.wait_run(client.trigger_job(job.id).id, timeout=60)
        print(f"job {job.id}: run {run.id} {run.status}: {run.result if run.status == 'SUCCEEDED' else run.error}")
        return 0 if run.status == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
