"""Composition roots: the only code that wires the adapters (``raft``, ``rpc``, ``storage``) to the ports."""
