"""The pure domain: jobs, runs, leases, schedules, commands and the replicated state machine.

No I/O, no clock, no threads, no gRPC, LMDB, boto3 or pysyncobj (import-linter
holds this). Time arrives inside commands.
"""
