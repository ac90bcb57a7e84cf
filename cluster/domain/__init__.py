"""The pure domain: jobs, runs, leases, schedules and commands — the values and rules the state machine applies.

The replicated state machine that applies them is ``raftsched.cluster.fsm``.
No I/O, no clock, no threads, no randomness, no gRPC, LMDB, boto3 or
pysyncobj (import-linter holds this). Time arrives inside commands.
"""
