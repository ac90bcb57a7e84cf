"""Whether a majority of the members cannot write their disks, and the words that name them.

While a majority of the members cannot write (a full or failing disk), no
write can commit: the contract answers such writes ``RESOURCE_EXHAUSTED``,
naming the nodes and their paths, rather than ``UNAVAILABLE`` (retry
elsewhere), which would not help. ``DiskMajority.exhausted()`` says so, from
this node's own ``Fitness`` and what each peer last said of itself in its
Raft probes (``raftsched.raft.peer_probe``; only fresh reports that say ``storage_ok``
is false count: a peer not heard from is down, not full).

Who calls: ``raftsched.cluster.node.replica`` when a write could not be proposed
or did not commit, on the caller's thread. Any thread may call it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from raftsched.cluster.node.fitness import REPORT_FRESH_S, REPORT_STORAGE_OK, REPORT_UNFIT, STORAGE, Fitness

Reports = Callable[[], dict[str, tuple[float, dict[str, Any]]]]


class DiskMajority:
    """``members()``: the Raft addresses of the members, this node's first; ``reports()``: each peer's last report by
    Raft address (``PeerProbes.reports``); ``name(address)``: a member's node id for the message."""

    def __init__(
        self,
        fitness: Fitness,
        members: Callable[[], list[str]],
        reports: Reports,
        name: Callable[[str], str],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fitness = fitness
        self._members = members
        self._reports = reports
        self._name = name
        self._monotonic = monotonic

    def unwritable(self) -> list[tuple[str, str]]:
        """(node id, why) of every member known now not to be able to write its disk."""
        members = self._members()
        out: list[tuple[str, str]] = []
        own = self._fitness.problems().get(STORAGE)
        if own is not None and members:
            out.append((self._name(members[0]), own))
        now, reports = self._monotonic(), self._reports()
        for address in members[1:]:
            heard = reports.get(address)
            if heard is None or now - heard[0] > REPORT_FRESH_S or heard[1].get(REPORT_STORAGE_OK) is not False:
                continue
            out.append((self._name(address), str(heard[1].get(REPORT_UNFIT, "")) or "its disk refuses writes"))
        return out

    def exhausted(self) -> str | None:
        """The RESOURCE_EXHAUSTED message while a majority of the members cannot write, else None."""
        members = self._members()
        down = self.unwritable()
        if not members or len(down) <= len(members) // 2:
            return None
        named = " ".join(f"[{node}] {why}." for node, why in down)
        return (
            f"{len(down)} of the {len(members)} members cannot write their disks, so no write can commit now: {named} "
            "Free space on those disks or grow them: the nodes resume by themselves within 30 s. The write has not "
            "committed (it may still, once they can write): retry it then, with the same idempotency key or request id"
        )
