"""Live output: a running attempt's log, shipped as parts, and how any log is read from a byte offset.

While an attempt runs, its executor ships the log's new bytes about once a
second as **parts** beside where the attempt's log will be stored, named by
the byte offset each starts at (every store alike: a file, an S3 object, a
memory entry):

    <job_id>/<run_id>/attempt-<n>-token-<t>.log.part-000000000000
    <job_id>/<run_id>/attempt-<n>-token-<t>.log.part-000000004096
    <job_id>/<run_id>/attempt-<n>-token-<t>.log.part-000033554432.held

A part holds bytes ``[offset, offset + size)`` of the attempt's log; the
reader lists the parts and concatenates the ones that follow each other from
byte 0 (a gap ends what it returns: a part still on its way, or lost). A
part shipped again after a failure has the same name and the same bytes from
its offset, so retries are idempotent. Only the log's **head** is shipped
live (the first half of the executor's log limit, the part every stored log
keeps whole), so the live bytes are always the beginning of the log stored
when the attempt ends and a reader's offset stays valid across the switch.
When the head is full, one ``.held`` part (a note, not log bytes) says that
the rest comes when the attempt ends.

Everything here is pure: names, and the plans each store follows to read a
window of a log (``plan_window``) or of its live parts (``plan_live``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PART_MARK = ".part-"
PART_DIGITS = 12
HELD_SUFFIX = ".held"
#: the largest offset a part name can carry (12 digits)
MAX_PART_OFFSET = 10**PART_DIGITS - 1

_PART = re.compile(r"\.part-(\d{12})(\.held)?$")
#: every name a raftsched attempt writes in its run's folder (and the ``.tmp`` of each while it is written)
_OUTPUT_NAME = re.compile(r"^attempt-\d+-token-\d+\.(log|result|log\.part-\d{12}(\.held)?)(\.tmp)?$")


def part_name(log_name: str, offset: int, held: bool = False) -> str:
    """The name of the part at ``offset`` beside ``log_name`` (a path, key or URI ending in ``.log``)."""
    if not 0 <= offset <= MAX_PART_OFFSET:
        raise ValueError(f"part offset {offset} is out of range (0 to {MAX_PART_OFFSET})")
    return f"{log_name}{PART_MARK}{offset:0{PART_DIGITS}d}{HELD_SUFFIX if held else ''}"


def parse_part(log_name: str, name: str) -> tuple[int, bool] | None:
    """``(offset, held)`` when ``name`` is a part of ``log_name``, else None."""
    if not name.startswith(log_name + PART_MARK):
        return None
    m = _PART.fullmatch(name[len(log_name) :])
    return None if m is None else (int(m.group(1)), m.group(2) is not None)


def is_output_name(basename: str) -> bool:
    """Whether a file or key's last step is one a raftsched attempt writes (log, result, part, or their .tmp)."""
    return _OUTPUT_NAME.match(basename) is not None


@dataclass(frozen=True, slots=True)
class Part:
    """A part as a store lists it: its offset in the log, its size, whether it is the held note, its name."""

    offset: int
    size: int
    held: bool
    name: str


@dataclass(frozen=True, slots=True)
class LogSlice:
    """A piece of a log as one read returns it.

    ``data``: the bytes from the asked offset (or, for offset 0 of a log over
    the answer limit, its head, a note and its tail); ``size``: the log's
    length as stored now (live: the bytes shipped so far that follow each
    other from 0); ``next_offset``: where the next read should start;
    ``note``: something to tell the reader (live output held back).
    """

    data: bytes
    size: int
    next_offset: int
    note: str = ""


@dataclass(frozen=True, slots=True)
class Window:
    """What to read of a stored log of ``size`` bytes: ``ranges`` (start, end), with ``cut_note`` between
    the first and the second when the log is cut to head + note + tail."""

    ranges: tuple[tuple[int, int], ...]
    next_offset: int
    cut: bool


def plan_window(size: int, offset: int, max_bytes: int) -> Window:
    """Which bytes of a stored log one answer carries.

    Offset 0 and a log over ``max_bytes``: its head and tail (``max_bytes // 2``
    each) with a note between, and the next offset is the end. Any other
    offset: up to ``max_bytes`` bytes from there (``max_bytes`` 0: no limit),
    so a reader that passes each answer's ``next_offset`` gets the whole log.
    The next offset never goes back: past the end it stays where it was.
    """
    if offset < 0:
        raise ValueError(f"offset {offset} is negative")
    if offset == 0 and max_bytes and size > max_bytes:
        half = max_bytes // 2
        return Window(((0, half), (size - half, size)), size, True)
    start = min(offset, size)
    end = size if not max_bytes else min(size, start + max_bytes)
    return Window(((start, end),) if end > start else (), max(offset, end), False)


@dataclass(frozen=True, slots=True)
class LivePlan:
    """What to read of a live log's parts: ``pieces`` (part, start, end within the part) in order."""

    pieces: tuple[tuple[Part, int, int], ...]
    size: int
    next_offset: int
    held: Part | None


def plan_live(parts: list[Part], offset: int, max_bytes: int) -> LivePlan:
    """Which bytes of which parts make the live log from ``offset`` (up to ``max_bytes``; 0: no limit).

    Parts are taken in offset order while they follow each other from byte 0
    (overlaps are fine: a re-shipped part repeats the same bytes); the first
    gap ends the live log. A piece is never split below a whole part unless
    ``max_bytes`` requires it. ``held`` is the ``.held`` note when the live log
    reaches it. The next offset never goes back (parts deleted once the whole
    log is stored read as none: the reader keeps its place).
    """
    if offset < 0:
        raise ValueError(f"offset {offset} is negative")
    size, chain = 0, []
    for part in sorted((p for p in parts if not p.held), key=lambda p: (p.offset, -p.size)):
        if part.offset > size:
            break
        if part.offset + part.size > size:
            chain.append(part)
            size = part.offset + part.size
    held = next((p for p in parts if p.held and p.offset == size), None)
    pos, budget, pieces = min(offset, size), max_bytes or size, []
    for part in chain:
        end = part.offset + part.size
        if end <= pos or budget <= 0:
            continue
        take = min(end - pos, budget)
        pieces.append((part, pos - part.offset, pos - part.offset + take))
        pos, budget = pos + take, budget - take
    return LivePlan(tuple(pieces), size, max(offset, pos), held)
