"""Test-only entry point: ``raftsched`` as its next version would be, one command format newer.

``python -m tests.format_bump_node node --config C --node-id N`` runs a node
that understands command format ``FORMAT_VERSION + 1``, which adds one
command, ``format_probe`` (a no-op: it changes nothing in the state). Once
running, the node tries to commit a probe every ``PROBE_EVERY_S`` through
the node's one way into the state (``Replica.execute``) and logs
each outcome:

    format probe committed at entry <index>
    format probe refused: <why>

The rolling-upgrade test starts nodes with it one at a time: until every
member runs it the cluster keeps its format and every probe is refused
before it is proposed; once all do, the leader switches the cluster to the
new format and probes commit. A node started with the plain ``raftsched``
afterwards meets a newer command in the log and must stop, naming both formats.
"""

from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass
from typing import Any

from raftsched.cluster.domain.commands import wire as command_registry
from raftsched.cluster.domain.commands.wire import STR, Field, command
from raftsched.cluster.domain.errors import RaftschedError
from raftsched.cluster.domain.results import Ok, Result

NEXT_FORMAT = command_registry.FORMAT_VERSION + 1
PROBE_EVERY_S = 0.5
log = logging.getLogger("raftsched.format_probe")


@command("format_probe", (Field("node", "node_id", STR),), since=NEXT_FORMAT)
@dataclass(frozen=True, slots=True)
class FormatProbe:
    now_ms: int
    node_id: str


def _apply_probe(tx: Any, cmd: FormatProbe) -> Result:
    return Ok(tx.index)


def _probe(node: Any) -> None:
    stop = threading.Event()
    while not stop.wait(PROBE_EVERY_S):
        try:
            index = node.replica.execute(FormatProbe(node.clock.now_ms(), node.node_id))
            log.info("format probe committed at entry %s", index)
        except RaftschedError as exc:
            log.info("format probe refused: %s", exc)


def main() -> int:
    command_registry.FORMAT_VERSION = NEXT_FORMAT
    from raftsched.cluster.fsm.machine import HANDLERS

    HANDLERS[FormatProbe] = _apply_probe
    from raftsched.cluster.app import main as raftsched
    from raftsched.cluster.app import node_main

    start = node_main.Node.start

    def start_and_probe(self: Any) -> None:
        start(self)
        threading.Thread(target=_probe, args=(self,), name="format-probe", daemon=True).start()

    node_main.Node.start = start_and_probe  # type: ignore[method-assign]
    return raftsched.main()


if __name__ == "__main__":
    sys.exit(main())
