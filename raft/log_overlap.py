"""AppendEntries that overlap the follower's log: what it already holds is kept, as Raft says.

Raft (§5.3, receiver rule 3) deletes a follower's entries only where one
conflicts with the leader's (same index, another term). pysyncobj 0.3.17's
follower deletes every entry after ``prevLogIdx`` whenever its log goes
further, even entries that match, and appends the leader's again. A leader
resends from an earlier index (after a follower's ``reset`` answer, while
later messages are still on their way), so a follower could drop entries it
had acknowledged — committed ones — and hold a log shorter than what it had
applied until the leader's next messages brought them back. A vote given
meanwhile could elect a node without them; a leader that died before sending
them again left the follower short for good.

``trim`` rewrites such a message before pysyncobj reads it:

* the leading entries this log holds with the same term are left out
  (``prevLogIdx``/``prevLogTerm`` move to the last of them), so pysyncobj
  appends only what is new and deletes only from a real conflict;
* when every entry matches and the log goes further, nothing is deleted:
  the message keeps no entries and no ``prevLogIdx`` (pysyncobj then only
  takes its term and commit index), its commit index is bounded by the last
  entry the leader vouched for (Raft's "index of last new entry": entries
  past it may be from an older term and must not be applied on its word),
  and ``trim`` returns that index for the caller to acknowledge
  (``raftsched.raft.pysyncobj_patches``).

An entry too large for one message comes in pieces (``transmission``:
``start``, ``process``..., ``finish``) that pysyncobj joins and reads with the
last one. ``Pieces`` joins them too, so the last piece is trimmed like any
message: when its entry is already here and the log goes further, pysyncobj
is given no ``prevLogIdx`` (it then ignores the piece; its buffer starts
again with the next ``start``) and the caller acknowledges it.

A message pysyncobj will refuse (stale term, an earlier index this log does
not hold, a term that does not match at ``prevLogIdx``) or one that does not
overlap the log is left as it is.
"""

from __future__ import annotations

from typing import Any, Protocol

import pysyncobj.pickle as pysyncobj_pickle  # what pysyncobj reads a joined entry with


class Log(Protocol):
    """What ``trim`` reads of the follower's log."""

    def first_index(self) -> int: ...

    def last_index(self) -> int: ...

    def term_at(self, index: int) -> int: ...


def trim(message: dict[str, Any], log: Log, joined: Any = None) -> int | None:
    """Rewrite the AppendEntries ``message`` (from a leader whose term this node accepts) so that pysyncobj neither
    deletes nor appends again an entry this log holds with the same term (see the module docstring). Returns the
    last index the leader vouched for when the caller must acknowledge the message itself (every entry matched and
    the log goes further: pysyncobj is given no ``prevLogIdx`` and answers nothing), else None. ``joined``: the
    entry a last piece completes (``Pieces``); any other piece is left as it is."""
    if "prevLogIdx" not in message:
        return None
    piece = "transmission" in message
    if piece and joined is None:
        return None
    prev = message["prevLogIdx"]
    last = log.last_index()
    if prev >= last or prev < log.first_index() or log.term_at(prev) != message["prevLogTerm"]:
        return None  # no overlap, or pysyncobj refuses it (and the leader sends from elsewhere)
    entries = [joined] if piece else list(message.get("entries") or ())
    held = 0
    for entry in entries:
        index, term = entry[1], entry[2]
        if index > last or log.term_at(index) != term:
            break
        held += 1
    if held < len(entries):  # the rest is new or conflicts: pysyncobj appends it (deleting from a conflict only)
        if held:
            message["prevLogIdx"], message["prevLogTerm"] = entries[held - 1][1], entries[held - 1][2]
            message["entries"] = entries[held:]
        return None
    vouched = entries[-1][1] if entries else prev
    if vouched == last and not piece:  # the log ends where the message does: nothing to delete or append
        message["prevLogIdx"], message["prevLogTerm"], message["entries"] = last, log.term_at(last), []
        return None
    del message["prevLogIdx"]
    message.pop("prevLogTerm", None)
    message["entries"] = []
    message["commit_index"] = min(message["commit_index"], vouched)
    return vouched


class Pieces:
    """The pieces of a large entry, joined as pysyncobj joins them (``syncobj.py``: ``__recvTransmission``); fed
    every piece pysyncobj reads (an AppendEntries it accepts), in order."""

    def __init__(self) -> None:
        self._data = b""

    def feed(self, message: dict[str, Any]) -> Any:
        """The entry the piece ``message`` completes (its last), else None."""
        kind, data = message.get("transmission"), message.get("data", b"")
        if kind == "start":
            self._data = data
            return None
        self._data += data
        if kind != "finish":
            return None
        joined, self._data = self._data, b""
        try:
            return pysyncobj_pickle.loads(joined)
        except Exception:  # pysyncobj fails on it too, and says so; nothing is trimmed
            return None


class SyncObjLog:
    """``Log`` over a pysyncobj ``SyncObj``'s own log (read on its tick thread, as pysyncobj reads it)."""

    def __init__(self, syncobj: Any) -> None:
        self._log = syncobj._SyncObj__raftLog
        self._first: int | None = None

    def first_index(self) -> int:
        if self._first is None:
            self._first = int(self._log[0][1])
        return self._first

    def last_index(self) -> int:
        return int(self._log[-1][1])

    def term_at(self, index: int) -> int:
        return int(self._log[index - self.first_index()][2])
