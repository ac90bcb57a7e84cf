"""Task kind ``etcd_grant``: a closed loop of etcd LeaseGrant through its JSON gateway (the etcd baseline)."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

from bench.tasks.context import Ctx, merge_parts, run_threads


def _grant(conn: http.client.HTTPConnection, body: bytes) -> None:
    conn.request("POST", "/v3/lease/grant", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200 or b'"ID"' not in data:
        raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")


def etcd_grant(ctx: Ctx) -> dict[str, Any]:
    """Every thread grants leases (TTL ``ttl``) on its member over a keep-alive connection until ``until``."""
    urls: list[tuple[str, int]] = ctx.task["etcd"]
    until, ttl = ctx.task["until"], ctx.task.get("ttl", 30)
    body = json.dumps({"TTL": ttl}).encode()

    def run(j: int) -> dict[str, Any]:
        host, port = urls[(ctx.index * ctx.threads + j) % len(urls)]
        conn = http.client.HTTPConnection(host, port, timeout=10)
        done, lat = [], []
        try:
            while time.time() < until:
                t0 = time.time()
                try:
                    _grant(conn, body)
                except Exception as exc:  # noqa: BLE001 - counted, connection renewed
                    ctx.errors.add(exc)
                    conn.close()
                    conn = http.client.HTTPConnection(host, port, timeout=10)
                    time.sleep(0.05)
                    continue
                t1 = time.time()
                done.append(t1)
                lat.append((t1 - t0) * 1000.0)
                ctx.progress.add()
        finally:
            conn.close()
        return {"done": done, "lat": lat}

    return merge_parts(run_threads(ctx.threads, run), ("done", "lat"))
