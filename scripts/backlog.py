#!/usr/bin/env python
"""The backlog run: ``python scripts/backlog.py [--jobs 1000000] [--kind mix|at] [--out DIR]``.

Only the entry point: the run is ``bench.backlog`` (``scripts/bench/backlog/``),
found because this folder is ``sys.path[0]`` when the script runs.
"""

from __future__ import annotations

import sys

from bench.backlog.run import main

if __name__ == "__main__":
    sys.exit(main())
