"""What ``raftsched executor`` lets jobs do, and the checks it makes before it runs any.

Flags (``add_safety_args``): ``--allow-type shell|http`` (off unless named),
``--pass-env NAME`` and ``--kill-grace SECONDS`` (``raftsched.cluster.executor.shell``),
``--run-as USER`` and ``--containment auto|pid-namespace|session``
(``raftsched.cluster.executor.containment``), ``--http-deny CIDR`` and ``--http-allow
CIDR`` (``raftsched.cluster.executor.http_guard``), and
``--allow-unauthenticated-cluster``.

**No commands for anyone who asks.** ``shell``, ``http`` and ``notify`` run
whatever a job's submitter says, as the executor's user (``COMMAND_TYPES``).
An executor allowing any of them first asks the cluster a JobService read
(``ListJobs``) **without a token** — whether or not it has one itself,
since a cluster without ``[auth]`` ignores the token it is given. If the
read succeeds, anyone who can reach the cluster could have the executor run
commands, and it refuses to start (exit status 2) unless
``--allow-unauthenticated-cluster`` is given, which it then logs as a
warning at every start. If the read is refused (``UNAUTHENTICATED``) the
cluster is closed; an executor that has no token of its own is then refused
too (it could lease nothing). While no node answers it asks again, with
backoff, until one does.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time

import grpc

from raftsched.cluster.executor.containment import MODES, resolve, run_as
from raftsched.cluster.executor.handlers import BuiltinSettings
from raftsched.cluster.executor.http_guard import AddressPolicy
from raftsched.cluster.executor.notify_handler import load_secrets
from raftsched.cluster.executor.shell import DEFAULT_KILL_GRACE_S, ShellSettings
from raftsched.cluster.node.config import ConfigError
from raftsched.rpc.client.channel import ChannelSecurity

#: built-in types that run what a job's submitter says: never for a cluster that takes calls without a token
COMMAND_TYPES = ("shell", "http", "notify")
OPEN_CLUSTER_FLAG = "--allow-unauthenticated-cluster"
_ASK_EVERY_MAX_S = 10.0


def add_safety_args(p: argparse.ArgumentParser) -> None:
    """What the executor lets jobs do: which built-in types run, what a shell run sees, where http may go."""
    p.add_argument(
        "--allow-type",
        action="append",
        default=[],
        metavar="TYPE",
        help="run this built-in type: shell, http or notify (repeatable; each is off unless named; noop and --handler "
        "types are always on; notify also serves the queue raftsched.notify)",
    )
    p.add_argument(
        "--notify-secrets",
        default="",
        metavar="FILE",
        help='TOML file of name = "value" secrets that sign notifications (Raftsched-Signature), by a rule\'s secret_name',
    )
    p.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="give shell runs this variable of the executor's environment too (repeatable; by default they get only "
        "PATH, HOME, LANG, TZ, the job's env and RAFTSCHED_*)",
    )
    p.add_argument(
        "--kill-grace",
        type=float,
        default=DEFAULT_KILL_GRACE_S,
        metavar="SECONDS",
        help=f"between SIGTERM and SIGKILL of a stopped run's processes (default {DEFAULT_KILL_GRACE_S:g})",
    )
    p.add_argument(
        "--run-as",
        default="",
        metavar="USER",
        help="run shell commands as this user (the executor must run as root)",
    )
    p.add_argument(
        "--containment",
        choices=MODES,
        default="auto",
        help="what each shell run is started in: a PID namespace of its own where possible (auto, the default), "
        "required (pid-namespace), or its supervisor's session only (session: jobs see the host's processes)",
    )
    p.add_argument(
        "--http-deny",
        action="append",
        default=[],
        metavar="CIDR",
        help="refuse http jobs to this address range (repeatable; link-local 169.254.0.0/16 and fe80::/10 always are)",
    )
    p.add_argument(
        "--http-allow",
        action="append",
        default=[],
        metavar="CIDR",
        help="let http jobs reach this loopback, private or multicast range, refused by default (repeatable; "
        "e.g. 10.1.2.0/24; never link-local, never an --http-deny range)",
    )
    p.add_argument(
        OPEN_CLUSTER_FLAG,
        action="store_true",
        help="allow shell, http and notify even when the cluster takes calls without a token: only on a machine "
        "where every local user is trusted (logged as a warning at every start)",
    )


def builtin_settings(args: argparse.Namespace) -> BuiltinSettings:
    """The built-in types' settings from the command line; ``ConfigError`` naming the bad flag."""
    try:
        user = run_as(args.run_as) if getattr(args, "run_as", "") else None
        shell_on = "shell" in getattr(args, "allow_type", [])
        shell = ShellSettings(
            tuple(getattr(args, "pass_env", [])),
            getattr(args, "kill_grace", DEFAULT_KILL_GRACE_S),
            resolve(getattr(args, "containment", "auto")) if shell_on else None,
            user,
        )
        policy = AddressPolicy.from_cidrs(getattr(args, "http_deny", []), getattr(args, "http_allow", []))
        path = getattr(args, "notify_secrets", "")
        secrets = load_secrets(path) if path else {}
        return BuiltinSettings(shell, policy, secrets)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def open_cluster_refusal(types: list[str]) -> str:
    """The error of an executor that would run ``types`` for a cluster that takes calls without a token."""
    return (
        f"the cluster answers calls without a token, so anyone who can reach it could have this executor run "
        f"{' and '.join(types)} jobs as its user. Give the cluster tokens ([auth] tokens_file) and this executor "
        f"one (--token-file FILE or RAFTSCHED_TOKEN_FILE), or pass {OPEN_CLUSTER_FLAG} on a machine where every "
        "local user is trusted"
    )


def check_cluster_closed(
    addresses: list[str], security: ChannelSecurity, types: list[str], log: logging.Logger, source: str = ""
) -> None:
    """Refuse (``ConfigError``) to run ``types`` for a cluster that answers a JobService read without a
    token, or, with none of our own, for a cluster that needs one; ask again while no node answers."""
    from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
    from raftsched.rpc.client.client import Client
    from raftsched.rpc.client.errors import describe

    anonymous = dataclasses.replace(security, token="")
    delay = 0.5
    with Client(addresses, deadline_s=10, security=anonymous) as client:
        client.source = source
        while True:
            try:
                client.job("ListJobs", pb.ListJobsRequest(page_size=1), timeout=5)
            except grpc.RpcError as exc:
                code = exc.code()
                if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    if not security.token:
                        raise ConfigError(
                            "the cluster needs a token (it refused a call without one): give this executor its "
                            "token with --token-file FILE or RAFTSCHED_TOKEN_FILE"
                        ) from None
                    return
                if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    log.warning(
                        "cannot tell yet whether the cluster takes calls without a token (%s); asking again in %.0f s",
                        describe(exc),
                        delay,
                    )
                    time.sleep(delay)
                    delay = min(delay * 2, _ASK_EVERY_MAX_S)
                    continue
                # any other answer came from past the token check: the call was let in
            raise ConfigError(open_cluster_refusal(types))
