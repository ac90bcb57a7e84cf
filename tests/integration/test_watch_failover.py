"""`raftsched run watch` across a SIGKILL of the node it streams from: it resumes on another node right
after the last change it showed, so every change of an interval job arrives once, in order — checked
against the runs read from the cluster afterwards. And the node side of resuming: a resume point
older than the history is OUT_OF_RANGE, and a resumed stream starts right after its point."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO

import grpc
import pytest

from raftsched.cluster.app.local_cluster import LocalCluster
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client
from tests.helpers import start_executor, wait_for

pytestmark = pytest.mark.integration


class Lines:
    """The lines a stream has written so far (read in a thread)."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def join(self) -> None:
        self._thread.join(10)


def _ms(rfc3339: str) -> int:
    return int(dt.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp() * 1000)


def noop_every(client: Client, name: str, every_ms: int, queue: str) -> pb.Job:
    spec = pb.JobSpec(name=name, type="noop", queue=queue)
    cv.to_dur(every_ms, spec.every)
    return client.create_job(spec)


def test_watch_fails_over_and_every_event_arrives_once_in_order(fresh_cluster: LocalCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    c = fresh_cluster
    executor = start_executor(c, str(tmp_path), "wf-ex", "wf", allow=())
    try:
        with Client(c.addresses) as client:
            job = noop_every(client, "wf-tick", 500, "wf")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")} | {"HOME": str(tmp_path)}
        watch = subprocess.Popen(
            [sys.executable, "-m", "raftsched.cluster.app.main", "run", "watch", "--job", job.job_id, "-o", "jsonl",
             "--cluster", ",".join(c.addresses)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path, start_new_session=True,
        )  # fmt: skip
        assert watch.stdout is not None and watch.stderr is not None
        out, err = Lines(watch.stdout), Lines(watch.stderr)

        def fired() -> int:  # the runs seen fired so far (the first events may be of runs fired before the watch)
            return sum('"kind": "fired"' in line for line in list(out.lines))

        try:
            first = wait_for(lambda: next((x for x in err.lines if "streaming from" in x), None), 20, "the watch to start")
            address = first.split("streaming from ")[1].split(",")[0].strip()
            victim = next(n for n in c.nodes.values() if n.grpc == address)
            wait_for(lambda: fired() >= 3, 20, "three fires before the kill")
            c.kill(victim.node_id)
            fired_at_kill = fired()
            wait_for(lambda: sum("streaming from" in x for x in err.lines) >= 2, 20, "the watch to resume elsewhere")
            wait_for(lambda: fired() >= fired_at_kill + 4, 30, "four fires after the failover")
        finally:
            os.kill(watch.pid, signal.SIGINT)  # Ctrl-C
            code = watch.wait(15)
            out.join()
            err.join()
        assert code == 130, f"Ctrl-C should end the watch with status 130, not {code}: " + "\n".join(err.lines)
        stopped_ms = int(time.time() * 1000)
        events = [json.loads(line) for line in out.lines]
        notes = "\n".join(err.lines)
        assert "stopped streaming" in notes and victim.grpc in notes, notes
        assert not any("no longer holds" in x for x in err.lines), notes  # resumed from the history, not started over

        points = [(int(e["index"]), e.get("position", 0)) for e in events]
        assert points == sorted(points) and len(set(points)) == len(points), "events out of order or twice"
        kinds: dict[str, list[str]] = {}
        for e in events:
            kinds.setdefault(e["run"]["run_id"], []).append(e["kind"])
        for run_id, seen in kinds.items():
            assert len(seen) == len(set(seen)), f"{run_id}: an event twice: {seen}"
            order = ["fired", "leased", "finished"]
            assert seen == [k for k in order if k in seen], f"{run_id}: events out of order: {seen}"

        with Client([n.grpc for n in c.nodes.values() if n.node_id != victim.node_id]) as client:
            runs = client.list_runs(job.job_id)
        fired = [e["run"] for e in events if e["kind"] == "fired"]
        lo = min(_ms(r["scheduled_time"]) for r in fired)
        hi = max(_ms(r["scheduled_time"]) for r in fired)
        window = [r for r in runs if lo <= cv.ts_ms(r.scheduled_time) <= hi]
        assert {r.run_id for r in window} == {r["run_id"] for r in fired}, "a run fired while watched was not seen"
        for r in window:
            if r.status == pb.RUN_STATUS_SUCCEEDED and cv.ts_ms(r.finished_at) < stopped_ms - 2000:
                assert kinds[r.run_id] == ["fired", "leased", "finished"], (r.run_id, kinds[r.run_id])
        assert len(window) >= 7, [(e["kind"], e["run"]["run_id"]) for e in events]  # 7+ runs seen fired
    finally:
        os.kill(executor.pid, signal.SIGTERM)
        executor.wait(30)


def test_a_resume_point_older_than_the_history_is_out_of_range(cluster: LocalCluster) -> None:
    with Client(cluster.addresses[:1]) as client:
        old = client.watch_runs(resume_after=(0, 0))
        with pytest.raises(grpc.RpcError) as err:
            next(iter(old))
        assert err.value.code() == grpc.StatusCode.OUT_OF_RANGE and "older than this node's history" in (
            err.value.details() or ""
        )
        stream = client.watch_runs(bookmarks=True)
        try:
            first = next(iter(stream))  # a stream asked for bookmarks opens with one
            assert first.kind == "bookmark" and first.index >= 1 and not first.HasField("run")
        finally:
            stream.cancel()
        spec = pb.JobSpec(name="resume-probe", type="noop", queue="q-resume")
        cv.to_dur(60_000, spec.after)
        probe = client.create_job(spec)
        client.job("TriggerJob", pb.TriggerJobRequest(job_id=probe.job_id))
        # resumed at the bookmark: the trigger's fire, which came after it, and nothing before it
        again = client.watch_runs(job_id=probe.job_id, resume_after=(first.index, first.position))
        try:
            ev = next(iter(again))
            assert ev.kind == "fired" and (ev.index, ev.position) > (first.index, first.position)
        finally:
            again.cancel()
        bad = client.watch_runs(resume_after=(first.index, 0), include_existing=True)
        with pytest.raises(grpc.RpcError) as err:
            next(iter(bad))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "not both" in (err.value.details() or "")
