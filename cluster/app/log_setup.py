"""Logging of the ``raftsched node`` and ``raftsched executor`` processes, configured in one place.

``--log-format text`` (the default) writes one line per record for people;
``--log-format json`` one JSON object per line for a log pipeline, made by
``python-json-logger``: ``timestamp`` (ISO 8601, UTC), ``level``, ``logger``,
the process's identity (``node`` or ``executor``: its id), ``message``, and,
for a record with an exception, ``exception`` (the traceback as text).
``--log-level`` sets the root level (DEBUG, INFO, WARNING, ERROR).
Records go to standard error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TextIO

from pythonjsonlogger.json import JsonFormatter

FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def add_log_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format", choices=FORMATS, default="text", help="text (default): for people; json: one object per line"
    )
    parser.add_argument(
        "--log-level", choices=LEVELS, default="INFO", type=str.upper, help="the least severe level logged (default INFO)"
    )


def json_formatter(identity: dict[str, str]) -> logging.Formatter:
    return JsonFormatter(
        "{levelname}{name}{message}",
        style="{",
        timestamp=True,
        rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"},
        static_fields=identity,
    )


def configure_logging(
    log_format: str, level: str, identity: dict[str, str], text_format: str, stream: TextIO | None = None
) -> None:
    """Replace the root logger's handlers with one writing to ``stream`` (standard error) in ``log_format``.

    ``identity`` (``{"node": "n1"}``) goes into every JSON record; ``text_format`` is the text
    format (a ``logging.Formatter`` format string that names the process itself)."""
    if log_format not in FORMATS:
        raise ValueError(f"unknown log format {log_format!r}: use one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(json_formatter(identity) if log_format == "json" else logging.Formatter(text_format))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
