"""Reading a log from a byte offset, whatever the store: the stores supply the bytes, this the shape.

``window_slice`` reads a stored log (``plan_window``: from an offset, or cut
to head + note + tail); ``live_slice`` reads a running attempt's live parts
(``plan_live``). Both take a function that reads one range and return a
``LogSlice``. A live part that vanished between listing and reading (the
whole log was stored and the parts removed) ends the slice there: the
reader keeps its offset and finds the rest in the stored log.
"""

from __future__ import annotations

from typing import Callable

from raftsched.cluster.domain.live_output import LogSlice, Part, plan_live, plan_window


def truncation_note(size: int, max_bytes: int, uri: str) -> bytes:
    return f"\n... [{size - 2 * (max_bytes // 2)} bytes of a {size}-byte log left out here; the whole log is at {uri}] ...\n".encode()


def window_slice(size: int, offset: int, max_bytes: int, uri: str, read: Callable[[int, int], bytes]) -> LogSlice:
    """The log of ``size`` bytes at ``uri`` from ``offset``; ``read(start, end)`` returns those bytes."""
    plan = plan_window(size, offset, max_bytes)
    pieces = [read(start, end) for start, end in plan.ranges]
    if plan.cut:
        pieces.insert(1, truncation_note(size, max_bytes, uri))
    return LogSlice(b"".join(pieces), size, plan.next_offset)


def live_slice(parts: list[Part], offset: int, max_bytes: int, read: Callable[[Part, int, int], bytes | None]) -> LogSlice:
    """The live log from ``offset``; ``read(part, start, end)`` returns bytes of a part (None: it is gone).

    The held note's text is read only when the slice reaches it.
    """
    plan = plan_live(parts, offset, max_bytes)
    out, pos = bytearray(), min(offset, plan.size)
    for part, start, end in plan.pieces:
        data = read(part, start, end)
        if data is None or len(data) < end - start:
            out += data or b""
            return LogSlice(bytes(out), plan.size, max(offset, pos + len(data or b"")))
        out += data
        pos += len(data)
    note = ""
    if plan.held is not None and plan.next_offset >= plan.size:
        text = read(plan.held, 0, plan.held.size)
        note = (text or b"").decode("utf-8", "replace")
    return LogSlice(bytes(out), plan.size, plan.next_offset, note)
