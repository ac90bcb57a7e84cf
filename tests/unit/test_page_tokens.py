"""Page tokens: only a token a node of this cluster issued, for the same call and filters, is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from raftsched.cluster.domain import commands as c
from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import Every, JobSpec
from raftsched.cluster.domain.validation import Limits
from raftsched.cluster.fsm.machine import JobStateMachine
from raftsched.cluster.node.clock import FakeClock
from raftsched.cluster.node.job_service import JobService
from raftsched.cluster.node.page_tokens import PageTokens, derive_key
from raftsched.storage import OutputReader

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
NOT_OURS = "page_token is not one this cluster issued"


def test_round_trip_and_any_node_of_the_cluster_accepts_it() -> None:
    n1, n2 = PageTokens(derive_key("the raft secret")), PageTokens(derive_key("the raft secret"))
    token = n1.issue("jobs", "j-000000000001abcd")
    assert token.startswith("p1.") and n2.open("jobs", token) == "j-000000000001abcd"
    assert n1.issue("jobs", "") == "" and n1.open("jobs", "") == ""


@pytest.mark.parametrize(
    "forged",
    [
        "9" * 5000,  # a giant token
        "9" * 1024,
        "j-000000000001abcd",  # a bare cursor, as tokens were before
        "1800000000000|j-1@1800000000000",
        "p1.ai0wMDAwMDAwMDAwMDFhYmNk.AAAAAAAAAAAAAAAA",  # a well-formed token with a made-up MAC
        "p2.ai0wMDAwMDAwMDAwMDFhYmNk.AAAAAAAAAAAAAAAA",
        "p1.%%%.AAAA",
        "p1.ai0w.ÄÖÜ",  # not ASCII
        "p1..",
        "....",
    ],
)
def test_tokens_nobody_issued_are_refused(forged: str) -> None:
    with pytest.raises(ValidationError, match="page_token") as err:
        PageTokens(derive_key("k")).open("jobs", forged)
    assert len(str(err.value)) < 400


def test_a_token_is_bound_to_its_cluster_call_and_filters() -> None:
    tokens = PageTokens(derive_key("cluster A"))
    token = tokens.issue("jobs\x1fq1", "j-1")
    with pytest.raises(ValidationError, match=NOT_OURS):
        PageTokens(derive_key("cluster B")).open("jobs\x1fq1", token)
    with pytest.raises(ValidationError, match=NOT_OURS):
        tokens.open("jobs\x1fq2", token)  # other filters
    with pytest.raises(ValidationError, match=NOT_OURS):
        tokens.open("runs\x1fq1", token)  # another call
    body, mac = token.split(".")[1:]
    with pytest.raises(ValidationError, match=NOT_OURS):
        tokens.open("jobs\x1fq1", f"p1.{body}x.{mac}")  # a changed cursor


def _service(tokens: PageTokens) -> JobService:
    m = JobStateMachine()
    for i in range(5):
        m.apply(c.encode(c.CreateJob(T0, f"j-{i:04d}", JobSpec(name=f"n{i}", schedule=Every(60_000)))), i + 1)

    class Store:
        def read(self, fn: Any, barrier: bool = True) -> Any:
            return fn(m)

        def read_records(self, fn: Any, barrier: bool = True) -> Any:
            return fn(m.view)

    return JobService(Store(), FakeClock(T0), Limits(), OutputReader(), tokens)  # type: ignore[arg-type]


def test_list_calls_page_with_tokens_across_nodes_and_refuse_forged_ones() -> None:
    key = derive_key("shared")
    n1, n2 = _service(PageTokens(key)), _service(PageTokens(key))
    first = n1.list_jobs(page_size=2)
    second = n2.list_jobs(page_size=2, page_token=first.next_token)  # the next page from another node
    assert [j.job_id for j in first.items + second.items] == ["j-0000", "j-0001", "j-0002", "j-0003"]
    with pytest.raises(ValidationError, match=NOT_OURS):
        n2.list_jobs(page_size=2, page_token=first.next_token, queue="other")
    with pytest.raises(ValidationError, match="page_token"):
        n1.list_runs(page_token="9" * 5000)
    with pytest.raises(ValidationError, match="page_token"):
        n1.list_runs(job_id="j-0001", page_token="9" * 1000)
    runs = n1.list_runs(page_size=1)
    assert runs.next_token == "" or runs.next_token.startswith("p1.")
