"""Disk helpers that both the state's store and the Raft log use: files and directories made durable
(``durable_files``), writes paced and written back as they come (``paced_io``), a process's I/O priority
(``io_priority``), and LMDB's own checks (``lmdb_check``: a truncated file; ``lmdb_owner``: a write
transaction ended on the thread that began it).

They know nothing of Raft, the state machine or jobs (import-linter holds it): ``raftsched.raft`` and
``raftsched.storage`` both build on them.
"""
