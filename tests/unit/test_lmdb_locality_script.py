"""scripts/bench/micro/lmdb_locality.py measures LMDB rewrites by how far each lands from the previous one
(importable: ``scripts/bench/micro`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

import re

import pytest

import lmdb_locality

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("writemap", [[], ["--writemap"]])
def test_it_reports_put_and_commit_for_every_stride(writemap: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert lmdb_locality.main(["--records", "500", "--writes", "200", "--per", "50", *writemap]) == 0
    out = capsys.readouterr().out
    rows = re.findall(r"^ +(\d+) +([\d.]+) +([\d.]+) +([\d.]+)$", out, re.M)
    assert [int(r[0]) for r in rows] == list(lmdb_locality.STRIDES), out
    for _, put, commit, total in rows:
        assert float(total) == pytest.approx(float(put) + float(commit), abs=0.02)
    assert ("writemap" in out) == bool(writemap)


def test_its_keys_are_distinct_and_in_creation_order() -> None:
    import random

    keys = lmdb_locality._keys(1000, random.Random(1))
    assert keys == sorted(keys) and len(set(keys)) == 1000


def test_bad_sizes_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        lmdb_locality.main(["--per", "0"])
    assert exit_.value.code == 2 and "must be at least 1" in capsys.readouterr().err
