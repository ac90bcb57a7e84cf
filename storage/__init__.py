"""LMDB state and the run-output stores (local disk, S3).

``storage.output`` holds the store contract, the local store, an in-memory
fake and the URI reader; ``storage.output_s3`` the boto3 store (imported
only when an S3 store is used, so boto3 loads only then).
"""

from storage.output import (
    EMPTY_OUTPUT_URI,
    MAX_RETURNED_LOG_BYTES,
    BytesLogSource,
    LocalOutputStore,
    LogSource,
    MemoryOutputStore,
    OutputKey,
    OutputMissing,
    OutputReader,
    OutputStore,
    OutputStoreError,
    as_log_source,
    read_file_uri,
)

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
