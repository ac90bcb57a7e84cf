#!/usr/bin/env python
"""This checkout's benchmark against another revision's, alternated in one window (``bench.compare``).

    python scripts/bench_compare.py --against REV [--rounds 2] [--out DIR] -- [scripts/bench.py arguments]

e.g. ``python scripts/bench_compare.py --against f91d6df -- --scenarios create,burst,leases``. Like
``scripts/bench.py``, only the entry point: run as a script, this folder is ``sys.path[0]`` and ``import bench``
finds the package beside it.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from bench.compare import main

    sys.exit(main())
