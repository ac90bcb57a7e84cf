"""``raftsched run watch``: run changes as they are applied, across node failures.

The stream comes from ``raftsched.rpc.client.watch.RunFollower``: when its node dies it
resumes on another node after the last change it showed, so nothing is shown
twice or skipped (within the nodes' history of recent changes; beyond it, it
says so on stderr and goes on from the runs that exist then). Where it
streams from, and every failover, is said on stderr.

Table output opens with a header: what is watched, the local zone the times
are in, and what FIRED vs SCHEDULED mean (a fire commits up to the
look-ahead, 0.1 s by default, before its instant; no run is leased before
it). ``json`` and ``jsonl`` print one object per line, ``yaml`` one document
per event, ``id`` the run ids.

``--count N`` counts runs, not changes: the watch stops once N runs have
ended (or, with ``--kind``, have had a change of those kinds), each run
counted once, after showing every change of theirs that came before.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from typing import Any, Iterator

from raftsched.cluster.app.cli.connect import UNREACHABLE_AFTER_S
from raftsched.cluster.app.cli.output import to_flag_forms, to_json, to_plain, to_yaml
from raftsched.cluster.app.cli.timefmt import local, local_zone_text, ts_ms
from raftsched.cluster.app.cli.views import run_note, run_status
from raftsched.cluster.domain.unsafe_text import escape
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc.client.client import Client
from raftsched.rpc.client.watch import RunFollower

#: the changes that end a run: what ``--count`` counts runs by when no ``--kind`` is given
ENDS = frozenset({"finished", "skipped"})
_WIDTHS = (12, 16, 37, 11, 12, 12, 7)
_HEADERS = ("TIME", "EVENT", "RUN ID", "STATUS", "SCHEDULED", "FIRED", "ATTEMPT", "NOTE")
_WIDE_HEADERS = ("EXECUTOR", "TOKEN", "POSITION")


def header(a: argparse.Namespace) -> str:
    what = f"job {a.job}" if a.job else "every job"
    if a.queue:
        what += f" on queue {a.queue}"
    kinds = ", ".join(a.kind) if a.kind else "every change"
    return (
        f"# run watch: runs of {what} ({kinds}); times are local ({local_zone_text()}); Ctrl-C stops\n"
        "# FIRED = when the fire committed: up to the look-ahead ([scheduler] fire_lookahead_s, 0.1 s by default)\n"
        "# before SCHEDULED; no run is leased before its SCHEDULED instant. EVENT: fired, leased, finished, ...\n"
        + _row(list(_HEADERS) + (list(_WIDE_HEADERS) if a.output == "wide" else []))
    )


def _row(cells: list[str]) -> str:
    cells = [escape(c) for c in cells]
    padded = [c.ljust(w) for c, w in zip(cells, _WIDTHS)] + cells[len(_WIDTHS) :]
    return "  ".join(padded).rstrip()


def event_line(ev: pb.RunEvent, wide: bool = False) -> str:
    r = ev.run
    cells = [
        local(ts_ms(ev.observed_at), millis=True, today_short=True),
        ev.kind,
        r.run_id,
        run_status(r),
        local(ts_ms(r.scheduled_time), millis=True, today_short=True),
        local(ts_ms(r.fired_at), millis=True, today_short=True),
        str(r.attempt),
        run_note(r, 40),
    ]
    if wide:
        cells = cells[:-1] + [r.executor_id or "-", str(r.fencing_token or "-"), f"{ev.index}.{ev.position}", cells[-1]]
    return _row(cells)


def format_event(fmt: str, ev: pb.RunEvent) -> str:
    if fmt in ("table", "wide"):
        return event_line(ev, fmt == "wide")
    if fmt == "id":
        return ev.run.run_id
    if fmt == "yaml":
        return "---\n" + to_yaml(to_flag_forms(ev)).rstrip("\n")
    return to_json(to_plain(ev))


def watch(a: argparse.Namespace, client: Client) -> None:
    opened = False

    def notice(text: str) -> None:
        print(f"# {text}", file=sys.stderr, flush=True)

    def connected(_address: str) -> None:
        nonlocal opened
        if not opened and a.output in ("table", "wide"):
            print(header(a), flush=True)  # once a node answers: no header above an error
        opened = True

    follower = RunFollower(
        client,
        a.job,
        a.queue,
        a.kind,
        include_existing=a.existing,
        notices=notice,
        connected=connected,
        first_give_up_s=UNREACHABLE_AFTER_S,
    )
    counted = RunCount(a.kind)
    with _ctrl_c_cancels(follower):
        try:
            for ev in follower:
                print(format_event(a.output, ev), flush=True)
                if a.count and counted.add(ev) >= a.count:
                    return
        finally:  # the stream is cancelled before its channel is closed
            follower.cancel()


class RunCount:
    """The runs ``--count`` counts: each run once, when it first reaches what is watched for — with ``--kind``,
    a change of one of those kinds; without, its end (``finished``: succeeded, failed, cancelled or dead-lettered;
    ``skipped``)."""

    def __init__(self, kinds: list[str]) -> None:
        self.kinds = frozenset(kinds) or ENDS
        self.runs: set[str] = set()

    def add(self, ev: pb.RunEvent) -> int:
        """Count ``ev``'s run if it is one; how many runs are counted."""
        if ev.kind in self.kinds:
            self.runs.add(ev.run.run_id)
        return len(self.runs)


@contextlib.contextmanager
def _ctrl_c_cancels(follower: RunFollower) -> Iterator[None]:
    """Ctrl-C (SIGINT) or SIGTERM ends the watch by cancelling its stream, which ends the iteration as
    ``--count`` does, and then exits as the signal asks (130 for Ctrl-C, 143 for SIGTERM): no
    KeyboardInterrupt raised somewhere inside gRPC's waits, where one can leave the process hanging
    instead of exiting (seen once in CI: a watch outlived SIGINT by 15 s). A second Ctrl-C interrupts at
    once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        got.append(signum)
        signal.signal(signum, before[signum])  # the next one acts at once
        follower.cancel()

    before: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        before[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
    if signal.SIGINT in got:
        raise KeyboardInterrupt
    if got:
        raise SystemExit(128 + got[0])


def add_watch_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job", default="", metavar="JOB_ID", help="only this job's runs")
    p.add_argument("--queue", default="", help="only runs on this queue")
    p.add_argument(
        "--kind",
        action="append",
        default=[],
        choices=["fired", "skipped", "leased", "retry_scheduled", "cancel_requested", "finished", "pruned"],
        help="only this kind of change (repeatable), e.g. --kind finished for outcomes only",
    )
    p.add_argument("--existing", action="store_true", help="first show the runs pending or leased now")
    p.add_argument(
        "--count",
        type=int,
        default=0,
        metavar="N",
        help="stop once N runs have ended (finished or skipped), every change of theirs shown; with --kind, once N runs "
        "have had such a change. Each run counts once (default: run until Ctrl-C)",
    )
