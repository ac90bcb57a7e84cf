"""A state machine's store calls, recorded as apply makes them and made again from a bare loop.

``apply_cost.py --shape steady --floor`` records every call apply makes into
its LMDB store during a steady round (``record_calls``), marking where each
measured phase begins and ends, then makes the same calls again, in order,
on a fresh environment with nothing of the state machine in between
(``replay``): what each phase's store work costs alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from itertools import islice
from typing import Any, Callable

#: one store call as ``record_calls`` records it: (what: get, put, delete, scan, commit, or a
#: phase's mark; table; key or scan start; value, scan stop, or the phase marked; rows a scan answered)
StoreOp = tuple[str, str, bytes, Any, int]


def record_calls(store: Any, ops: list[StoreOp]) -> None:
    """Make ``store`` append each of its reads, writes and commits to ``ops`` (instance attributes: the machine binds
    them when it is made)."""
    get, put, delete, scan, commit = store.get, store.put, store.delete, store.scan, store.commit

    def rec_get(table: str, key: bytes) -> Any:
        ops.append(("get", table, bytes(key), None, 0))
        return get(table, key)

    def rec_put(table: str, key: bytes, value: bytes) -> None:
        ops.append(("put", table, bytes(key), bytes(value), 0))
        put(table, key, value)

    def rec_delete(table: str, key: bytes) -> None:
        ops.append(("delete", table, bytes(key), None, 0))
        delete(table, key)

    def rec_scan(table: str, start: bytes = b"", stop: bytes | None = None, limit: int = 1000) -> Any:
        rows = scan(table, start, stop, limit)
        ops.append(("scan", table, bytes(start), stop, len(rows)))
        return rows

    def rec_commit() -> None:
        ops.append(("commit", "", b"", None, 0))
        commit()

    store.get, store.put, store.delete, store.scan, store.commit = rec_get, rec_put, rec_delete, rec_scan, rec_commit


def bare_env(folder: str) -> Any:
    """An LMDB environment in ``folder`` with room for the state's tables, written as a node's store writes (no
    sync at commit: the floor is the work, not the disk)."""
    import lmdb

    from raftsched.cluster.fsm.store import Table

    path = os.path.join(folder, "floor.mdb")
    return lmdb.open(path, subdir=False, map_size=8 << 30, max_dbs=len(Table.ALL) + 1, sync=False, metasync=False)


def replay(ops: list[StoreOp], before_close: Callable[[Any], None] = lambda env: None) -> tuple[float, float, float, int]:
    """Make each recorded call of ``ops`` on a fresh LMDB environment, with nothing of the state machine in between
    (a write transaction from the first call after a commit to the next commit, as the store batches an entry):
    the seconds spent in the fire, grant and complete phases (between their marks), and the store calls made in
    them. ``before_close`` is handed the environment after the last call (the tests read what it holds)."""

    from raftsched.cluster.fsm.store import Table

    folder = tempfile.mkdtemp(prefix="raftsched-floor-")
    env = bare_env(folder)
    spent = {"fire": 0.0, "grant": 0.0, "complete": 0.0, "": 0.0}
    calls = 0
    try:
        dbs = {t: env.open_db(t.encode()) for t in Table.ALL}
        txn: Any = None
        phase, began = "", time.perf_counter()
        for what, table, key, arg, rows in ops:
            if what == "mark":
                now = time.perf_counter()
                spent[phase] += now - began
                phase, began = arg, now
                continue
            calls += phase != ""
            if what == "commit":
                if txn is not None:
                    txn.commit()
                    txn = None
                continue
            if txn is None:
                txn = env.begin(write=True)
            if what == "get":
                txn.get(key, db=dbs[table])
            elif what == "put":
                txn.put(key, arg, db=dbs[table])
            elif what == "delete":
                txn.delete(key, db=dbs[table])
            elif rows:  # a scan: the rows it answered, read one call each as the store reads them
                with txn.cursor(db=dbs[table]) as cur:
                    if cur.set_range(key) if key else cur.first():
                        for _ in islice(cur.iternext(), rows):
                            pass
        if txn is not None:
            txn.commit()
        before_close(env)
    finally:
        env.close()
        shutil.rmtree(folder, ignore_errors=True)
    return spent["fire"], spent["grant"], spent["complete"], calls
