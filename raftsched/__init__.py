"""raftsched: cron as a service on Raft — exactly-once firing, leased execution.

This module is the public Python API; every other module under ``raftsched`` is private and may change.
The subpackages ``raftsched.cluster``, ``raftsched.raft``, ``raftsched.rpc``, ``raftsched.storage`` and
``raftsched.protos`` are the implementation (in the repository: the folders of the same names).
"""

from __future__ import annotations

from importlib import metadata as _metadata

try:
    __version__: str = _metadata.version("raftsched")
except _metadata.PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
