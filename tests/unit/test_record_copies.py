"""Copies of live records (``Job``, ``Run``) for readers: every slot carried over, the original never shared."""

from __future__ import annotations

import copy

import pytest

from raftsched.cluster.domain.leases import Grant
from raftsched.cluster.domain.model import Job, Run
from raftsched.cluster.node.detach import detach
from raftsched.cluster.node.event_hub import RunChange

pytestmark = pytest.mark.unit


def _filled(cls: type) -> tuple[object, dict[str, object]]:
    """An instance of ``cls`` whose every slot holds a value of its own (a fresh object)."""
    record = object.__new__(cls)
    values = {name: object() for name in cls.__slots__}
    for name, value in values.items():
        setattr(record, name, value)
    return record, values


@pytest.mark.parametrize("cls", [Job, Run])
def test_a_copy_holds_every_slot_of_the_original_and_is_a_record_of_its_own(cls: type) -> None:
    record, values = _filled(cls)
    for made in (copy.copy(record), detach(record)):
        assert made is not record and type(made) is cls
        assert {name: getattr(made, name) for name in cls.__slots__} == values
        assert all(getattr(made, name) is value for name, value in values.items())
        setattr(made, cls.__slots__[0], "changed")
        assert getattr(record, cls.__slots__[0]) is values[cls.__slots__[0]]


def test_a_run_copied_for_an_answer_or_a_watcher_is_equal_to_the_run_and_apart_from_it() -> None:
    run = Run("j@1000", "j", "q", 1000, 900)
    run.steps_raw = ((1000, "fired", "at its instant", "n1"),)
    run.extra = (("type", "notify"),)
    grant = detach(Grant(run, None))  # type: ignore[arg-type]
    change = RunChange("fired", run, 1000, 7, 0)
    made = [grant.run, change.run, detach([run])[0], detach((run, 3))[0]]
    for each in made:
        assert each is not run
        assert all(getattr(each, name) == getattr(run, name) for name in Run.__slots__)
    run.attempt = 5
    assert [each.attempt for each in made] == [0, 0, 0, 0]
