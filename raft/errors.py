"""The Raft adapter's one error root (it knows nothing of jobs, so not raftsched's domain errors).

``RaftError`` covers every error ``raft/`` raises on purpose: a damaged or
foreign log or snapshot (``JournalError``, ``SnapshotError``), a full log
(``LogFullError``), a proposal that did not commit (``ProposalError``), a
damaged batch (``BatchFormatError``), a failed peer handshake
(``HandshakeError``), an entry held back until the disk takes it
(``EntryHeld``) and a snapshot writer called off (``Cancelled``). The app layer reports them; the node's services see
only what the ``Replicator`` port answers.
"""


class RaftError(Exception):
    """Base of every error the Raft adapter raises on purpose."""
