"""Run logs on the local store are the executor's and its group's only: files 0640 in folders 0750, whatever
the executor's umask lets through at most; a node reading through its ``OutputReader`` still reads them."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

import pytest

from raftsched.cluster.domain.output import OutputKey
from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.storage.local_store import LocalOutputStore
from raftsched.storage.reader import OutputReader

pytestmark = pytest.mark.unit

KEY = OutputKey("j-1", "j-1@5", 1, 1001)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """An executor started from a shell with the usual umask 022: the store's own modes must decide."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_logs_results_and_live_parts_are_0640_in_0750_folders(tmp_path: Path) -> None:
    root = tmp_path / "outputs"
    store = LocalOutputStore(str(root))
    store.check()
    store.put_part(KEY, 0, b"live line\n")
    reader = OutputReader(location=OutputLocation(local_dir=str(root)))
    assert reader.read_live(KEY, 0).data == b"live line\n"
    uri = store.put(KEY, b"the whole log\n", b'{"rows": 3}')
    run_dir = root / "j-1" / "j-1@5"
    assert [_mode(p) for p in (root, root / "j-1", run_dir)] == [0o750, 0o750, 0o750]
    files = sorted(run_dir.iterdir())
    assert files and all(_mode(f) == 0o640 for f in files), {f.name: oct(_mode(f)) for f in files}
    assert reader.read(uri) == (b"the whole log\n", b'{"rows": 3}')


def test_a_rewritten_log_gets_the_new_mode(tmp_path: Path) -> None:
    root = tmp_path / "outputs"
    store = LocalOutputStore(str(root))
    store.put(KEY, b"first\n", b"")
    log = root / KEY.relpath()
    os.chmod(str(log) + ".log", 0o644)  # written by an older release
    store.put(KEY, b"second\n", b"")
    assert _mode(Path(str(log) + ".log")) == 0o640
