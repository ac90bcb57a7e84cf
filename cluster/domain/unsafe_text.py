"""Characters a terminal or an editor acts on instead of showing: refused in names, escaped when printed.

``UNSAFE`` is every C0 control (U+0000-U+001F: NUL, BEL, ESC, newline, ...),
DEL (U+007F), every C1 control (U+0080-U+009F: CSI, OSC, ...), the Unicode
bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F,
U+061C: they reorder what follows, so a name can read as another) and the
line and paragraph separators (U+2028, U+2029).

* ``check_text(field, value)`` refuses a value holding one with a
  ``ValidationError`` (INVALID_ARGUMENT) naming the field, the character and
  where it is: ``name contains U+001B (ESC) at position 4`` (positions count
  from 0). Names, idempotency keys, request ids and executor ids go through
  it before anything is proposed.
* ``escape(text)`` writes each one as a visible escape (``\\x1b``, ``\\n``,
  ``\\u202e``) for a table cell, so stored text from before the rule, or a
  run's error, cannot move the cursor, ring, recolour or reorder a terminal.
  ``keep_newlines`` keeps ``\\n`` for text whose lines are ours.
  ``escape_json`` does the same to a JSON document, as ``\\uXXXX`` escapes
  (the same values once parsed).

Pure: no I/O.
"""

from __future__ import annotations

import re

from raftsched.cluster.domain.errors import ValidationError

_C0 = (
    "NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US"
).split()
_C1 = (
    "PAD HOP BPH NBH IND NEL SSA ESA HTS HTJ VTS PLD PLU RI SS2 SS3 DCS PU1 PU2 STS CCH MW SPA EPA SOS SGCI SCI CSI ST OSC PM APC"
).split()
_NAMES: dict[str, str] = {
    **{chr(i): name for i, name in enumerate(_C0)},
    "\x7f": "DEL",
    **{chr(0x80 + i): name for i, name in enumerate(_C1)},
    "\u061c": "ARABIC LETTER MARK",
    "\u200e": "LEFT-TO-RIGHT MARK",
    "\u200f": "RIGHT-TO-LEFT MARK",
    "\u2028": "LINE SEPARATOR",
    "\u2029": "PARAGRAPH SEPARATOR",
    "\u202a": "LEFT-TO-RIGHT EMBEDDING",
    "\u202b": "RIGHT-TO-LEFT EMBEDDING",
    "\u202c": "POP DIRECTIONAL FORMATTING",
    "\u202d": "LEFT-TO-RIGHT OVERRIDE",
    "\u202e": "RIGHT-TO-LEFT OVERRIDE",
    "\u2066": "LEFT-TO-RIGHT ISOLATE",
    "\u2067": "RIGHT-TO-LEFT ISOLATE",
    "\u2068": "FIRST STRONG ISOLATE",
    "\u2069": "POP DIRECTIONAL ISOLATE",
}
#: every character this module refuses and escapes
UNSAFE = frozenset(_NAMES)
_UNSAFE_RE = re.compile("[" + "".join(f"\\u{ord(ch):04x}" for ch in sorted(UNSAFE)) + "]")
_UNSAFE_BUT_NEWLINE_RE = re.compile("[" + "".join(f"\\u{ord(ch):04x}" for ch in sorted(UNSAFE - {"\n"})) + "]")
#: what ``json.dumps`` leaves raw: not C0 (it escapes those in strings, and its layout uses newlines)
_JSON_RAW_RE = re.compile("[" + "".join(f"\\u{ord(ch):04x}" for ch in sorted(UNSAFE) if ord(ch) >= 0x20) + "]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def char_name(ch: str) -> str:
    """``U+001B (ESC)``: the code point and its name."""
    return f"U+{ord(ch):04X} ({_NAMES.get(ch, 'character')})"


def first_unsafe(value: str) -> tuple[int, str] | None:
    """(position, character) of the first unsafe character in ``value``, or None."""
    found = _UNSAFE_RE.search(value)
    return None if found is None else (found.start(), found.group())


def check_text(field: str, value: str) -> None:
    """Refuse ``value`` if it holds a control or bidirectional character (``ValidationError`` naming it)."""
    found = first_unsafe(value)
    if found is not None:
        position, ch = found
        raise ValidationError(
            f"{field} contains {char_name(ch)} at position {position}: control characters and bidirectional "
            "controls are not allowed (they would act on a terminal or reorder the text instead of showing)"
        )


def _escaped(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _SHORT:
        return _SHORT[ch]
    return f"\\x{ord(ch):02x}" if ord(ch) <= 0xFF else f"\\u{ord(ch):04x}"


def escape(text: str, keep_newlines: bool = False) -> str:
    """``text`` with each unsafe character written as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``)."""
    pattern = _UNSAFE_BUT_NEWLINE_RE if keep_newlines else _UNSAFE_RE
    return pattern.sub(_escaped, text) if pattern.search(text) else text


def escape_json(document: str) -> str:
    """A JSON (or YAML double-quoted) text with the unsafe characters ``json.dumps(ensure_ascii=False)``
    leaves raw (DEL, C1, bidirectional controls, separators) written as ``\\uXXXX``: the same values."""
    return _JSON_RAW_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
