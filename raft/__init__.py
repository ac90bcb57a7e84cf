"""The pysyncobj adapter: replication of opaque commands. Knows nothing of jobs."""

from raftsched.raft.adapter import ProposalError, RaftNode, RaftSettings, StateMachine
from raftsched.raft.snapshot_file import SnapshotError

__all__ = ["ProposalError", "RaftNode", "RaftSettings", "SnapshotError", "StateMachine"]
