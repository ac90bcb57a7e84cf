"""An in-memory output store for tests: ``mem://<key>``; ``failures`` makes the next N puts fail."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from cluster.domain.output import OutputKey, OutputMissing, OutputStoreError
from cluster.executor.ports import LogSource, as_log_source


@dataclass
class MemoryOutputStore:
    """An in-memory store for tests: ``mem://<key>``; ``failures`` makes the next N puts fail."""

    objects: dict[str, bytes] = field(default_factory=dict)
    failures: int = 0
    retryable: bool = True
    puts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def describe(self) -> str:
        return "mem://"

    def check(self) -> None:
        pass

    def uri_for(self, key: OutputKey) -> str:
        return f"mem://{key.relpath()}.log"

    def put(self, key: OutputKey, log: bytes | LogSource, result: bytes) -> str:
        with self._lock:
            self.puts += 1
            if self.failures > 0:
                self.failures -= 1
                raise OutputStoreError("the fake store is down", self.retryable)
        with as_log_source(log).open_reader() as reader:
            data = reader.read()
        self.objects[f"{key.relpath()}.result"] = bytes(result)
        self.objects[f"{key.relpath()}.log"] = data
        return self.uri_for(key)

    def get(self, uri: str) -> tuple[bytes, bytes]:
        rel = uri[len("mem://") :]
        if rel not in self.objects:
            raise OutputMissing(f"{uri} is not in the store")
        return self.objects[rel], self.objects.get(rel[:-4] + ".result", b"")
