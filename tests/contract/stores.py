"""One harness per output store, so that a single suite can hold every store to the same contract.

A ``StoreCase`` wraps a fresh, empty store with what the suite needs to look
behind it: everything it has stored (``objects``, ``is_empty``), how many
requests reached its backend (``requests``), how an object was uploaded
(``parts``), half-written uploads or temp files left behind (``leftovers``),
a way to lose an object (``remove``, as a lifecycle rule or a wiped disk
would), an ``OutputReader`` that reads its URIs (given the store's location,
as a node's is: it reads nothing outside, and finds live parts from a key),
and ``unusable`` variants
whose ``check()`` must fail. ``divergences`` names the contract points a
store is known to miss (the suite marks those ``xfail(strict=True)``, so a
fix shows up as an unexpected pass).

The cases: ``MemoryOutputStore`` (the fake), ``LocalOutputStore`` in a temp
dir, ``S3OutputStore`` against a moto server on loopback (``tests.moto_server``).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.storage import LocalOutputStore, MemoryOutputStore, OutputReader, OutputStore, OutputStoreError
from raftsched.storage.output_s3 import MIN_PART_SIZE, S3OutputReader, S3OutputStore
from tests.moto_server import BUCKET, REGION, MotoServer

#: no single read of a log source may ask for more than this (S3's default part size): logs stream
MAX_READ_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Unusable:
    """A store whose ``check()`` must raise ``OutputStoreError`` naming ``names`` and saying ``says``."""

    what: str
    check: Callable[[], OutputStoreError | None]
    names: str
    says: str


class StoreCase:
    name = ""
    #: what the reader says of an output whose log is gone
    missing_says = ""
    #: contract point -> why this store misses it (the suite expects that test to fail)
    divergences: dict[str, str] = {}

    def __init__(self, store: OutputStore, reader: OutputReader) -> None:
        self.store = store
        self.reader = reader

    def objects(self) -> dict[str, bytes]:
        """Every stored object (file), by its name below the store's root or prefix."""
        raise NotImplementedError

    def is_empty(self) -> bool:
        """Nothing at all is stored: no object, and for a directory store no subdirectory either."""
        return not self.objects()

    def remove(self, name: str) -> None:
        raise NotImplementedError

    def requests(self) -> int | None:
        """Requests that reached the backend so far, where they can be counted."""
        return None

    def parts(self, uri: str) -> int:
        """How many parts the object at ``uri`` was uploaded in (1: one write)."""
        return 1

    def expected_parts(self, size: int) -> int:
        return 1

    def leftovers(self) -> list[str]:
        """Half-written uploads or temp files the store left behind."""
        return []

    def unusable(self) -> list[Unusable]:
        return []


class MemoryCase(StoreCase):
    name = "memory"
    missing_says = "is not in the store"

    def __init__(self) -> None:
        self.memory = MemoryOutputStore()
        super().__init__(self.memory, OutputReader(memory=self.memory, location=OutputLocation(memory=True)))

    def objects(self) -> dict[str, bytes]:
        return dict(self.memory.objects)

    def remove(self, name: str) -> None:
        del self.memory.objects[name]

    def requests(self) -> int:
        return self.memory.puts

    def unusable(self) -> list[Unusable]:
        broken = MemoryOutputStore(unusable="the test made it unusable")
        return [Unusable("a store marked unusable", lambda: _check_error(broken), "mem://", "the test made it unusable")]


class LocalCase(StoreCase):
    name = "local"
    missing_says = "cannot be read on this node"

    def __init__(self, root: str) -> None:
        self.root = root
        super().__init__(LocalOutputStore(root), OutputReader(location=OutputLocation(local_dir=os.path.abspath(root))))

    def _walk(self) -> tuple[list[str], list[str]]:
        dirs: list[str] = []
        files: list[str] = []
        for here, subdirs, names in os.walk(self.root):
            rel = os.path.relpath(here, self.root)
            dirs += [os.path.normpath(os.path.join(rel, d)) for d in subdirs]
            files += [os.path.normpath(os.path.join(rel, n)) for n in names]
        return dirs, files

    def objects(self) -> dict[str, bytes]:
        out = {}
        for name in self._walk()[1]:
            with open(os.path.join(self.root, name), "rb") as f:
                out[name] = f.read()
        return out

    def is_empty(self) -> bool:
        return not any(self._walk())

    def remove(self, name: str) -> None:
        os.remove(os.path.join(self.root, name))

    def leftovers(self) -> list[str]:
        return [n for n in self._walk()[1] if n.endswith(".tmp")]

    def unusable(self) -> list[Unusable]:
        blocker = os.path.join(os.path.dirname(self.root), "a-file")
        with open(blocker, "w") as f:
            f.write("not a directory")
        readonly = os.path.join(os.path.dirname(self.root), "read-only")
        os.makedirs(readonly)
        os.chmod(readonly, 0o555)
        return [
            Unusable("a path through a file", lambda: _check_error(LocalOutputStore(blocker + "/out")), blocker, "cannot create"),
            Unusable("a read-only directory", lambda: check_without_root_powers(readonly), readonly, "not writable"),
            Unusable(
                "a directory below a read-only one",
                lambda: check_without_root_powers(readonly + "/out"),
                readonly,
                "cannot create",
            ),
        ]


class S3Case(StoreCase):
    name = "s3"
    missing_says = "is not in the bucket"

    def __init__(self, server: MotoServer) -> None:
        self.server = server
        self.prefix = f"contract-{uuid.uuid4().hex[:12]}"
        store = S3OutputStore(BUCKET, self.prefix, REGION, server.url, part_size=MIN_PART_SIZE)
        self.calls: list[str] = []
        # count every request the store's own client makes (botocore's event hooks; the client is the store's)
        store._client.meta.events.register("before-call.s3", lambda event_name, **kw: self.calls.append(event_name))
        location = OutputLocation(s3_bucket=BUCKET, s3_prefix=self.prefix)
        super().__init__(store, OutputReader(s3_reader=lambda: S3OutputReader(server.url, REGION), location=location))
        self.s3 = server.client()

    def objects(self) -> dict[str, bytes]:
        out = {}
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self.prefix + "/")
        for page in pages:
            for obj in page.get("Contents", []):
                body = self.s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"]
                out[obj["Key"][len(self.prefix) + 1 :]] = body.read()
        return out

    def remove(self, name: str) -> None:
        self.s3.delete_object(Bucket=BUCKET, Key=f"{self.prefix}/{name}")

    def requests(self) -> int:
        return len(self.calls)

    def parts(self, uri: str) -> int:
        etag = self.s3.head_object(Bucket=BUCKET, Key=uri.split("/", 3)[3])["ETag"].strip('"')
        return int(etag.rpartition("-")[2]) if "-" in etag else 1

    def expected_parts(self, size: int) -> int:
        return 1 if size <= MIN_PART_SIZE else -(-size // MIN_PART_SIZE)

    def leftovers(self) -> list[str]:
        uploads = self.s3.list_multipart_uploads(Bucket=BUCKET, Prefix=self.prefix).get("Uploads", [])
        return [u["Key"] for u in uploads]

    def unusable(self) -> list[Unusable]:
        missing = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
        store = S3OutputStore(missing, "raftsched", REGION, self.server.url)
        return [Unusable("a missing bucket", lambda: _check_error(store), missing, "the bucket does not exist")]


def _check_error(store: OutputStore) -> OutputStoreError | None:
    try:
        store.check()
    except OutputStoreError as exc:
        return exc
    return None


_CHILD_CHECK = """
import json, sys
from raftsched.storage import LocalOutputStore, OutputStoreError
try:
    LocalOutputStore(sys.argv[1]).check()
    print(json.dumps(None))
except OutputStoreError as exc:
    print(json.dumps([str(exc), exc.retryable]))
"""


def _drop_dac_override() -> None:
    """In a child before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so file modes bind root too."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def check_without_root_powers(root: str) -> OutputStoreError | None:
    """``LocalOutputStore(root).check()`` as a user whom file modes bind: in this process unless it is root,
    else in a child without the capabilities that let root write anywhere."""
    if os.geteuid() != 0:
        return _check_error(LocalOutputStore(root))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD_CHECK, root], capture_output=True, text=True, timeout=60, preexec_fn=_drop_dac_override
    )
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    return None if answer is None else OutputStoreError(answer[0], answer[1])


class FailingLogSource:
    """A 20 MiB log whose reader breaks after 2 MiB (and at once when asked for everything)."""

    size = 20 * 1024 * 1024

    def open_reader(self) -> BinaryIO:
        return _FailingReader()  # type: ignore[return-value]


class _FailingReader:
    def __init__(self) -> None:
        self.given = 0

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or self.given >= 2 * 1024 * 1024:
            raise OSError("disk went away")
        n = min(n, 1024 * 1024)
        self.given += n
        return b"y" * n

    def __enter__(self) -> "_FailingReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


class ReadRecorder:
    """A ``LogSource`` over another that records the size of every read its readers are asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads: list[int] = []

    @property
    def size(self) -> int:
        return int(self.inner.size)

    def open_reader(self) -> BinaryIO:
        reader = self.inner.open_reader()
        recorder = self

        class Recording:
            def read(self, n: int = -1) -> bytes:
                recorder.reads.append(n)
                return bytes(reader.read(n))

            def __enter__(self) -> "Recording":
                return self

            def __exit__(self, *exc: Any) -> None:
                reader.close()

        return Recording()  # type: ignore[return-value]
