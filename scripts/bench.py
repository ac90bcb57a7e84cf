#!/usr/bin/env python
"""raftsched benchmark: one command, its own clusters on loopback, a table and bench.json.

    python scripts/bench.py [--quick] [--out DIR]

Starts, in one run and on this machine only (127.0.0.1):

* a bare 3-process pysyncobj cluster with the SyncObjConf our nodes use
  (``raftsched.raft.adapter.build_conf``): the ceiling for replicated commands;
* a 3-member etcd (when ``/usr/bin/etcd`` is installed): LeaseGrant, for comparison;
* a 3-node raftsched cluster (``raftsched.cluster.app.local_cluster.LocalCluster``), on which it
  measures CreateJob throughput, fire lag at a steady fire rate, leader
  failover (SIGKILL) to the next committed fire, a burst of jobs all due at
  one instant, and (once leases exist) lease grants and end-to-end runs.

Load comes from separate client processes (multiprocessing, spawn), each with
several threads, spread across the nodes. Every process started here is
stopped by pid in ``finally`` blocks; everything lives in a temp dir under
/tmp. Results: a table on stdout (progress while it runs), ``DIR/bench.json``
(the keys listed in ``bench.report.RESULT_KEYS`` at least), ``DIR/series.json``
(the raw series behind the plots) and PNG plots (``bench.plots``).

This file is only the entry point: the benchmark is the ``bench`` package
beside it (``scripts/bench/``). Run as ``python scripts/bench.py``, this
folder is ``sys.path[0]``, and a package directory wins over a module of the
same name, so ``import bench`` finds the package, not this file. The
scenarios are listed in ``bench.scenarios.SCENARIOS``.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # imported here, not above: the spawned client processes import this file as ``__mp_main__``
    # and then only the module of their own target, not the whole benchmark
    from bench.cli import main

    sys.exit(main())
