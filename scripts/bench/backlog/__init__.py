"""The one-million-job backlog run (``python scripts/backlog.py``): see ``bench.backlog.run``.

* ``seed``   — the backlog built in a state machine and written as every node's snapshot;
* ``probes`` — serving checks, RSS, a fire-lag watch, snapshot windows from the node logs;
* ``run``    — the command line and the order of the measurements.
"""
