"""Build the client commands' parsers and run one: exit 0, 1 (the cluster refused or could not be
reached: one line on stderr saying why) or 2 (a command line or config that cannot be used)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import grpc

from raftsched.cluster.app.cli import cluster, jobs, runs
from raftsched.cluster.app.cli.args import CommandFailed, UsageError, add_noun, common_parser
from raftsched.cluster.app.cli.connect import connect
from raftsched.cluster.domain.unsafe_text import escape
from raftsched.cluster.node.config import ConfigError
from raftsched.rpc.client.errors import describe

NOUNS = (
    ("job", "create, list, change and preview jobs", jobs.COMMANDS),
    ("run", "list, inspect, cancel and watch runs, and read their logs", runs.COMMANDS),
    ("cluster", "the cluster: status, leader, members, backup", cluster.COMMANDS),
)


def add_client_commands(sub: Any) -> None:
    common = common_parser()
    for noun, help_text, commands in NOUNS:
        add_noun(sub, noun, help_text, commands, common)


def _say(text: str) -> None:
    """One error on stderr, with what a node sent escaped (``raftsched.cluster.domain.unsafe_text``)."""
    print(f"raftsched: {escape(text, keep_newlines=True)}", file=sys.stderr)


def run(a: argparse.Namespace) -> int:
    try:
        with connect(a) as client:
            a.handler(a, client)
    except (UsageError, ConfigError) as exc:
        _say(str(exc))
        return 2
    except CommandFailed as exc:
        _say(str(exc))
        return 1
    except grpc.RpcError as exc:
        _say(describe(exc))
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0
