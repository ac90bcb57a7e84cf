#!/usr/bin/env python
"""What a rewrite of one record costs LMDB by how far it lands from the previous one: LMDB alone, no state machine.

    python scripts/bench/micro/lmdb_locality.py [--records 200000] [--writes 20000] [--per 100] [--writemap]

Fills one LMDB environment (as the state's is opened: ``sync=False``,
``metasync=False``, no readahead) with ``--records`` records of
``VALUE_BYTES`` under keys shaped like run ids (``j-<ms><random>@<instant>``,
in creation order), then rewrites ``--writes`` of them, ``--per`` to a
transaction (as a grant entry rewrites its runs), each time ``stride``
records past the previous one: 1 is a backlog taken in storage order, a
large stride one taken out of it (runs granted by priority). Prints the CPU
microseconds per rewrite spent in ``put`` and in ``commit`` for each stride.

A rewrite that shares its page with the previous one costs little; one that
lands on a page of its own copies the page (``put``) and writes it with a
call of its own (``commit``). That is what a grant out of storage order pays
beyond one in order (``docs/performance.md``, "Where the time goes").
``--writemap`` opens the environment with ``writemap=True`` to compare (the
state never uses it: see ``raftsched.storage.lmdb_state``).
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time

import lmdb

VALUE_BYTES = 240
STRIDES = (1, 2, 5, 10, 20, 50, 997)


def _keys(records: int, rnd: random.Random) -> list[bytes]:
    return [f"j-{1_767_225_600_000 + i:012x}{rnd.getrandbits(32):08x}@1767225600000".encode() for i in range(records)]


def measure(
    records: int, writes: int, per: int, writemap: bool = False, strides: tuple[int, ...] = STRIDES
) -> dict[int, tuple[float, float]]:
    """stride -> (put, commit) CPU microseconds per rewrite."""
    rnd = random.Random(5)
    folder = tempfile.mkdtemp(prefix="raftsched-lmdb-locality-")
    env = lmdb.open(
        f"{folder}/state.mdb", subdir=False, map_size=1 << 32, sync=False, metasync=False, readahead=False,
        max_dbs=2, writemap=writemap,
    )  # fmt: skip
    try:
        db = env.open_db(b"runs")
        keys = _keys(records, rnd)
        value = bytes(rnd.getrandbits(8) for _ in range(VALUE_BYTES))
        with env.begin(write=True) as txn:
            for key in keys:
                txn.put(key, value, db=db)
        out: dict[int, tuple[float, float]] = {}
        for stride in strides:
            start = rnd.randrange(records)
            order = [(start + i * stride) % records for i in range(writes)]
            put = commit = 0.0
            for k in range(0, writes, per):
                began = time.process_time()
                txn = env.begin(write=True)
                for i in order[k : k + per]:
                    txn.put(keys[i], value, db=db)
                mid = time.process_time()
                txn.commit()
                put += mid - began
                commit += time.process_time() - mid
            out[stride] = (put / writes * 1e6, commit / writes * 1e6)
        return out
    finally:
        env.close()
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--writes", type=int, default=20_000)
    ap.add_argument("--per", type=int, default=100, help="rewrites per transaction")
    ap.add_argument("--writemap", action="store_true")
    args = ap.parse_args(argv)
    if args.records < 1 or args.writes < 1 or args.per < 1:
        ap.error("--records, --writes and --per must be at least 1")
    mode = "writemap" if args.writemap else "as the state is opened"
    print(f"LMDB rewrites of {args.records} records of {VALUE_BYTES} bytes, {args.per} to a transaction ({mode}):")
    print("  stride    put us  commit us  total us")
    for stride, (put, commit) in measure(args.records, args.writes, args.per, args.writemap).items():
        print(f"  {stride:6d}  {put:8.2f}  {commit:9.2f}  {put + commit:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
