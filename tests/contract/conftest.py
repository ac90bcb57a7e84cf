"""The ``case`` fixture: each output store in turn (memory, local, S3 on a moto server), fresh and empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract.stores import LocalCase, MemoryCase, S3Case, StoreCase

STORES = ["memory", "local", "s3"]


@pytest.fixture(params=STORES)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> StoreCase:
    if request.param == "memory":
        return MemoryCase()
    if request.param == "local":
        return LocalCase(str(tmp_path / "out"))
    return S3Case(request.getfixturevalue("s3"))  # the module's moto server (tests/conftest.py), started on first use
