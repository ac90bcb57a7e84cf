"""The raftsched benchmark, as a package run by ``python scripts/bench.py [--quick] [--out DIR]``.

It starts, on this machine only (127.0.0.1), its own clusters and client
processes, measures, and writes a table on stdout, ``DIR/bench.json``,
``DIR/series.json`` and PNG plots. ``python scripts/backlog.py`` (the
one-million-job backlog) lives here too, in ``bench.backlog``.

Layout, one job per module:

* ``profile``   — the run's sizes and durations (full, quick);
* ``harness``   — the parent side: the run's state (``Bench``), the pool of
  client processes, watches and pollers, the load monitor, process clean-up
  by pid, the raftsched cluster;
* ``tasks``     — what the client processes run (closed and paced loads);
* ``baselines`` — what raftsched is compared with: a bare pysyncobj
  cluster, a no-op gRPC server, etcd when installed;
* ``scenarios`` — one module per scenario, listed once in
  ``scenarios.SCENARIOS``;
* ``report``    — targets, verdicts, the table, bench.json and series.json;
* ``stats``     — pure statistics; ``plots`` — matplotlib.

Runtime code (cluster/, rpc/, raft/, storage/) never imports this package.
This ``__init__`` imports nothing, so ``bench.stats`` loads without grpc.
"""
