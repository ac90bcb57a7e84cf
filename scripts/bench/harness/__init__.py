"""The parent side of a benchmark run: its state, its processes and what watches the cluster.

* ``common``    — clocks in ms, job specs, rounding, the repository root;
* ``context``   — ``Bench``: results, notes, series, progress printing, the time budget;
* ``pool``      — ``WorkerPool``: the client processes that run ``bench.tasks``;
* ``processes`` — CPU of a pid, executors, stopping what we started by pid;
* ``cluster``   — starting the 3-node raftsched cluster and waiting until it serves;
* ``watch``     — WatchRuns streams and ClusterStatus pollers in threads;
* ``load``      — how much CPU processes outside the benchmark take meanwhile.
"""
