"""A brand-new cluster takes every field the moment it has a leader: a script that starts a cluster and creates
jobs at once is never told to finish a rolling upgrade (the cluster starts on command format 1 and switches up
once every member has reported; a request that needs the newer format waits for that switch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftsched import Client
from tests.conftest import running_cluster

pytestmark = pytest.mark.integration


def test_jobs_with_the_newest_fields_are_taken_as_soon_as_there_is_a_leader(tmp_path: Path) -> None:
    with running_cluster(str(tmp_path / "c")) as cluster, Client(cluster.addresses) as client:
        shaped = client.create_job(
            "fresh-shaped", every="1h", type="noop", priority=4, concurrency_key="acct", concurrency_limit=1,
            labels={"team": "billing"}, failed_history_limit=5,
        )  # fmt: skip
        last_friday = client.create_job("fresh-cron", cron="0 9 * * 5L", tz="Europe/Berlin", type="noop")
        assert shaped.spec.extra["priority"] == 4 and shaped.labels == {"team": "billing"}
        assert shaped.spec.failed_history_limit == 5
        assert client.get_job(shaped.id).spec.extra["concurrency_key"] == "acct"
        assert last_friday.next_fire_time is not None and last_friday.next_fire_time.weekday() == 4
        assert client.cluster_status().command_format >= 5
