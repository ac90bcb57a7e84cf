"""An in-memory output store for tests: ``mem://<key>``; ``failures`` makes the next N puts fail."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from cluster.domain.output import OutputKey, OutputMissing, OutputStoreError, result_name
from cluster.executor.ports import LogSource, as_log_source
from storage.local_store import truncation_note


@dataclass
class MemoryOutputStore:
    """An in-memory store for tests: ``mem://<key>``; ``failures`` makes the next N puts fail;
    ``unusable`` (a reason) makes ``check`` fail as a misconfigured store's would."""

    objects: dict[str, bytes] = field(default_factory=dict)
    failures: int = 0
    retryable: bool = True
    puts: int = 0
    unusable: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    CHUNK = 1024 * 1024

    def describe(self) -> str:
        return "mem://"

    def check(self) -> None:
        if self.unusable:
            raise OutputStoreError(f"the in-memory store mem:// cannot be used: {self.unusable}", False)

    def uri_for(self, key: OutputKey) -> str:
        return f"mem://{key.relpath()}.log"

    def put(self, key: OutputKey, log: bytes | LogSource, result: bytes) -> str:
        with self._lock:
            self.puts += 1
            if self.failures > 0:
                self.failures -= 1
                raise OutputStoreError("the fake store is down", self.retryable)
        data = bytearray()
        try:
            with as_log_source(log).open_reader() as reader:
                while chunk := reader.read(self.CHUNK):
                    data += chunk
        except OSError as exc:
            raise OutputStoreError(f"cannot read the log of {key.relpath()} to store it: {exc.strerror or exc}") from exc
        self.objects[f"{key.relpath()}.result"] = bytes(result)
        self.objects[f"{key.relpath()}.log"] = bytes(data)
        return self.uri_for(key)

    def get(self, uri: str, max_bytes: int = 0) -> tuple[bytes, bytes]:
        """(log, result) at ``uri``; a log over ``max_bytes`` (0: no limit) comes back as head + note + tail."""
        rel = uri[len("mem://") :]
        if rel not in self.objects:
            raise OutputMissing(f"{uri} is not in the store")
        log = self.objects[rel]
        if max_bytes and len(log) > max_bytes:
            half = max_bytes // 2
            log = log[:half] + truncation_note(len(log), max_bytes, uri) + log[len(log) - half :]
        return log, self.objects.get(result_name(rel), b"")
