"""LMDB state and the run-output stores (local disk, S3)."""
