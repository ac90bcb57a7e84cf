"""The cluster's membership on a node: AddNode, RemoveNode and GetClusterStatus (``service``), and the loop that
carries each change through and keeps the data dir's record of the members (``keeper``).

Where the rest of membership lives, by layer: its commands (``raftsched.cluster.domain.commands.membership``),
how the replicated state records them (``raftsched.cluster.fsm.membership``), and pysyncobj's own configuration
change, leadership transfer and election hold (``raftsched.raft.membership``).
"""

from __future__ import annotations

from raftsched.cluster.node.membership.keeper import MembershipKeeper, next_cluster_format
from raftsched.cluster.node.membership.service import MembershipService, MembershipView, read_view

__all__ = ["MembershipKeeper", "MembershipService", "MembershipView", "next_cluster_format", "read_view"]
