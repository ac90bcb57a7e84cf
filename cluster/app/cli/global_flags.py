"""The flags every client command takes, accepted before the command too: ``raftsched --cluster H:P job list``
reads as ``raftsched job list --cluster H:P``.

argparse takes a subcommand's flags only after it, so ``hoist_client_flags``
moves the flags of ``common_parser`` (where the cluster is, ``-o``, TLS and
token) that stand before ``job``/``run``/``cluster`` to just after the
command's name, where its parser finds them. Anything else before the noun,
and any command line without a client noun (``node``, ``executor``, ...),
is left as it is, for argparse to accept or refuse. A flag given both before
and after the command: the one after wins, as argparse keeps the last.
"""

from __future__ import annotations

import argparse

from raftsched.cluster.app.cli.args import common_parser

#: the nouns whose commands take the common flags
CLIENT_NOUNS = ("job", "run", "cluster")


def _flag_arity() -> dict[str, int]:
    """Each common flag's option strings -> how many values follow it (0 or 1)."""
    arity: dict[str, int] = {}
    for action in common_parser()._actions:
        takes = 0 if isinstance(action, (argparse._StoreTrueAction, argparse._StoreConstAction)) else 1
        for option in action.option_strings:
            arity[option] = takes
    return arity


def _leading_flags(argv: list[str], arity: dict[str, int]) -> int:
    """How many words at the start of ``argv`` are common flags and their values."""
    i = 0
    while i < len(argv):
        word = argv[i]
        name = word.split("=", 1)[0] if word.startswith("--") else word
        if name not in arity:
            break
        i += 1 if "=" in word or not arity[name] else 2
    return min(i, len(argv))


def hoist_client_flags(argv: list[str]) -> list[str]:
    """``argv`` with the common flags that come before a client noun moved after its command's name."""
    arity = _flag_arity()
    leading = _leading_flags(argv, arity)
    if not leading or leading >= len(argv) or argv[leading] not in CLIENT_NOUNS:
        return list(argv)
    flags, rest = argv[:leading], argv[leading:]
    noun, after = rest[0], rest[1:]
    if not after or after[0].startswith("-"):  # no command name (``job --help``): argparse says what is missing
        return list(argv)
    return [noun, after[0], *flags, *after[1:]]
