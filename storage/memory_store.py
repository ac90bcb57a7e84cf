"""An in-memory output store for tests: ``mem://<key>``; ``failures`` makes the next N puts fail.

It takes live parts too (``put_part``: ``<key>.log.part-<offset>``, see
``raftsched.cluster.domain.live_output``) and reads logs and parts from an offset.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from raftsched.cluster.domain.live_output import LogSlice, Part, parse_part, part_name
from raftsched.cluster.domain.output import OutputKey, OutputMissing, OutputStoreError, result_name
from raftsched.cluster.executor.ports import LogSource, as_log_source
from raftsched.storage.log_slices import live_slice, window_slice


@dataclass
class MemoryOutputStore:
    """An in-memory store for tests: ``mem://<key>``; ``failures`` makes the next N puts fail (and
    ``part_failures`` the next N ``put_part`` calls); ``unusable`` (a reason) makes ``check`` fail as a
    misconfigured store's would."""

    objects: dict[str, bytes] = field(default_factory=dict)
    failures: int = 0
    retryable: bool = True
    puts: int = 0
    #: ``put_part`` and ``delete_parts`` calls
    part_calls: int = 0
    part_failures: int = 0
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

    def put_part(self, key: OutputKey, offset: int, data: bytes, held: bool = False) -> None:
        with self._lock:
            self.part_calls += 1
            if self.part_failures > 0:
                self.part_failures -= 1
                raise OutputStoreError("the fake store is down", self.retryable)
        self.objects[part_name(f"{key.relpath()}.log", offset, held)] = bytes(data)

    def delete_parts(self, key: OutputKey, parts: list[tuple[int, bool]]) -> None:
        with self._lock:
            self.part_calls += 1
        for offset, held in parts:
            self.objects.pop(part_name(f"{key.relpath()}.log", offset, held), None)

    def get(self, uri: str, max_bytes: int = 0) -> tuple[bytes, bytes]:
        """(log, result) at ``uri``; a log over ``max_bytes`` (0: no limit) comes back as head + note + tail."""
        piece, result = self.get_at(uri, 0, max_bytes)
        return piece.data, result

    def get_at(self, uri: str, offset: int, max_bytes: int = 0) -> tuple[LogSlice, bytes]:
        """The log at ``uri`` from ``offset`` (``raftsched.cluster.domain.live_output.plan_window``) and its result."""
        rel = uri[len("mem://") :]
        log = self.objects.get(rel)
        if log is None:
            raise OutputMissing(f"{uri} is not in the store")
        piece = window_slice(len(log), offset, max_bytes, uri, lambda a, b: log[a:b])
        return piece, self.objects.get(result_name(rel), b"")

    def get_live(self, uri: str, offset: int, max_bytes: int = 0) -> LogSlice:
        """The live parts of the log at ``uri`` from ``offset``."""
        rel = uri[len("mem://") :]
        parts = []
        for name, data in list(self.objects.items()):
            found = parse_part(rel, name)
            if found is not None:
                parts.append(Part(found[0], len(data), found[1], name))

        def read(part: Part, start: int, end: int) -> bytes | None:
            data = self.objects.get(part.name)
            return None if data is None else data[start:end]

        return live_slice(parts, offset, max_bytes, read)
