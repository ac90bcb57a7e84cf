"""Run-output stores: where executors put each attempt's log and result, and how nodes read them.

* ``raftsched.storage.local_store`` — files under a directory (the default);
* ``raftsched.storage.output_s3`` — S3 or any S3-compatible server (boto3 is imported
  only when an S3 store is used);
* ``raftsched.storage.memory_store`` — an in-memory fake for tests;
* ``raftsched.storage.reader`` — reads any of them back by URI (the node's port);
* ``raftsched.storage.janitor`` — removes the output of runs that retention dropped;
* ``raftsched.storage.s3_client`` — the one place a boto3 S3 client is built.

The key layout and the errors are the domain's (``raftsched.cluster.domain.output``);
the store contract is the executor's port (``raftsched.cluster.executor.ports``).
The Raft log's LMDB environment belongs to the Raft adapter (``raft/``).
"""

from raftsched.cluster.domain.output import EMPTY_OUTPUT_URI, OutputKey, OutputMissing, OutputStoreError
from raftsched.cluster.executor.ports import BytesLogSource, LogSource, OutputStore, as_log_source
from raftsched.storage.local_store import LocalOutputStore, read_file_uri
from raftsched.storage.memory_store import MemoryOutputStore
from raftsched.storage.reader import MAX_RETURNED_LOG_BYTES, OutputReader

__all__ = [
    "EMPTY_OUTPUT_URI",
    "MAX_RETURNED_LOG_BYTES",
    "BytesLogSource",
    "LocalOutputStore",
    "LogSource",
    "MemoryOutputStore",
    "OutputKey",
    "OutputMissing",
    "OutputReader",
    "OutputStore",
    "OutputStoreError",
    "as_log_source",
    "read_file_uri",
]
