"""The state machine's write rule is held by its structure: one transaction writes, handlers are plain functions.

* Every handler in ``HANDLERS`` is a module-level function ``(tx, cmd)``.
* In ``raftsched.cluster.fsm``, only ``tx`` (and the store itself) writes a
  store: every other module's ``put``, ``delete``, ``begin`` and ``commit``
  go through a ``tx``.
* No module but ``tx`` writes a record table or ``meta``: records are written
  back by ``Tx.end_command`` from what the command held, and the small state
  by ``Tx.commit``, so none can be forgotten.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.fsm.machine import HANDLERS

pytestmark = pytest.mark.unit

FSM = Path(__file__).resolve().parents[3] / "cluster" / "fsm"
WRITES = {"put", "delete", "begin", "commit", "load_sorted"}
#: the modules that write a store themselves: the transaction, and the store
WRITERS = {"tx.py", "store.py"}
RECORD_TABLES = {"JOBS", "RUNS", "META"}


def _modules() -> list[Path]:
    found = sorted(FSM.glob("*.py"))
    assert len(found) > 10, f"the state machine's modules are not in {FSM}"
    return found


def _calls(path: Path) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.Call)]


def _writes(path: Path) -> list[ast.Call]:
    return [call for call in _calls(path) if isinstance(call.func, ast.Attribute) and call.func.attr in WRITES]


def test_every_command_has_a_plain_function_of_the_transaction_and_the_command() -> None:
    assert set(HANDLERS) == set(c.registered_commands())
    for cmd_type, handler in HANDLERS.items():
        assert inspect.isfunction(handler), cmd_type
        assert list(inspect.signature(handler).parameters) == ["tx", "cmd"], (cmd_type, handler)


def test_only_the_transaction_writes_the_store() -> None:
    found = []
    for path in _modules():
        if path.name in WRITERS:
            continue
        for call in _writes(path):
            receiver = ast.unparse(call.func.value)  # type: ignore[attr-defined]
            if receiver not in ("tx", "self.tx"):
                found.append(f"{path.name}:{call.lineno}: {ast.unparse(call)}")
    assert found == [], "write through the transaction (tx): " + "; ".join(found)


def test_no_module_but_the_transaction_writes_a_record_or_the_small_state() -> None:
    found = []
    for path in _modules():
        if path.name in WRITERS:
            continue
        for call in _writes(path):
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Attribute) and first.attr in RECORD_TABLES:
                found.append(f"{path.name}:{call.lineno}: {ast.unparse(call)}")
    assert found == [], "records and meta are written by Tx.end_command and Tx.commit only: " + "; ".join(found)


def test_the_checks_see_a_write_behind_the_transactions_back(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(m, tx):\n    m.store.put(Table.DUE, b'k', b'')\n    tx.put(Table.RUNS, b'r', b'')\n")
    assert [ast.unparse(call) for call in _writes(bad)] == ["m.store.put(Table.DUE, b'k', b'')", "tx.put(Table.RUNS, b'r', b'')"]
