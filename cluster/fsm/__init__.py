"""The replicated state machine, readable in one place: functions over one transaction.

Read in this order:

* ``machine`` — ``JobStateMachine``: ``apply`` / ``commit`` / ``load`` /
  ``restore``, and ``HANDLERS``, the table of every command's handler.
* the handlers, by subject — ``jobs``, ``fire``, ``runs`` (a run's life, and
  cancel and retry), ``leases``, ``retention``, ``requests``, ``membership``:
  plain functions ``(tx, cmd) -> Result``.
* ``tx`` — the one transaction: the only writer of records and index rows;
  ``cache`` — what it keeps between commands, in one budget; ``memory`` —
  the small state and the live indexes kept in memory.
* ``store`` — the storage port (tables of ordered bytes) and its in-memory
  implementation; ``keys`` and ``layout`` — the bytes of the tables' keys and
  values; ``body`` — the whole state as one blob.
* ``queries`` and ``reader`` — what other threads read.

Pure: no I/O of its own, no clock, no threads, no randomness (import-linter
holds it). The pure values and rules it applies are ``raftsched.cluster.domain``'s.
"""
