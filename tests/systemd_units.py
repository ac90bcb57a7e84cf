"""Reading the systemd unit files under ``scripts/systemd`` as systemd would, for the tests.

``read_unit(path)`` gives a ``Unit``: every ``Key=value`` of every section, in
order (a key may repeat). ``Unit.exec_start(instance, hostname, env)`` is the
``ExecStart=`` command as systemd runs it for that instance: specifiers
(``%i``, ``%I``, ``%H``, ``%%``) replaced, the line split into words as
systemd does (quotes), ``$NAME`` replaced by the words of the variable and
``${NAME}`` by its value as one word (an unset variable is nothing), ``$$``
by ``$``. ``read_environment_file`` reads an ``EnvironmentFile=``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

UNIT_DIR = Path(__file__).resolve().parent.parent / "scripts" / "systemd"

_WORD_VAR = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)$")
_BRACED_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Unit:
    path: Path
    #: (section, key, value) in file order
    entries: tuple[tuple[str, str, str], ...]

    def values(self, section: str, key: str) -> list[str]:
        return [v for s, k, v in self.entries if (s, k) == (section, key)]

    def value(self, section: str, key: str) -> str:
        """The one value of ``key`` (the last, as systemd takes it for a single-valued setting)."""
        found = self.values(section, key)
        if not found:
            raise KeyError(f"{self.path.name}: no {key}= in [{section}]")
        return found[-1]

    def exec_start(self, instance: str = "", hostname: str = "host", env: Mapping[str, str] | None = None) -> list[str]:
        line = self.value("Service", "ExecStart")
        specifiers = {"i": instance, "I": instance, "H": hostname, "%": "%"}
        line = re.sub(r"%(.)", lambda m: specifiers[m.group(1)], line)
        env = env or {}
        argv: list[str] = []
        for word in shlex.split(line):
            whole = _WORD_VAR.match(word)
            if whole:
                argv += env.get(whole.group(1), "").split()
            else:
                argv.append(_BRACED_VAR.sub(lambda m: env.get(m.group(1), ""), word).replace("$$", "$"))
        return argv


def read_unit(path: Path | str) -> Unit:
    path = Path(path)
    entries = []
    section = ""
    text = path.read_text(encoding="utf-8").replace("\\\n", " ")
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{path}: not Key=value: {raw!r}")
        entries.append((section, key.strip(), value.strip()))
    return Unit(path, tuple(entries))


def read_environment_file(path: Path | str) -> dict[str, str]:
    """``NAME=value`` lines (comments and blank lines skipped; quotes around a value removed)."""
    env = {}
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        name, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[name.strip()] = value
    return env


def seconds(span: str) -> float:
    """A systemd time span (``30s``, ``1min 30s``, ``90``) in seconds."""
    units = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "ms": 0.001}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", span):
        total += float(number) * units[unit]
    return total
