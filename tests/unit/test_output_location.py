"""log_uri only inside the node's own output store: accepted by CompleteRun, read by GetRunOutput and deleted
by the janitor under one rule (``OutputLocation``); a symlink out of the output directory is not followed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.output import OutputMissing
from raftsched.cluster.domain.output_location import OutputLocation
from raftsched.storage import OutputReader
from raftsched.storage.janitor import OutputJanitor

pytestmark = pytest.mark.unit

LOCAL = OutputLocation(local_dir="/srv/rs/outputs")
S3 = OutputLocation(s3_bucket="acme-logs", s3_prefix="raftsched")
S3_NO_PREFIX = OutputLocation(s3_bucket="acme-logs", s3_prefix="")
NAME = "J/R/attempt-1-token-1001.log"

ACCEPTED = [
    (LOCAL, ""),
    (LOCAL, "data:,"),
    (LOCAL, f"file:///srv/rs/outputs/{NAME}"),
    (LOCAL, f"file:///srv/rs/outputs/exec-1/{NAME}"),
    (S3, "data:,"),
    (S3, f"s3://acme-logs/raftsched/{NAME}"),
    (S3, f"s3://acme-logs/raftsched/team-a/{NAME}"),
    (S3_NO_PREFIX, f"s3://acme-logs/{NAME}"),
]

REFUSED = [
    (LOCAL, f"file:///etc/{NAME}", "not under /srv/rs/outputs"),
    (LOCAL, f"file:///srv/rs/outputs/../secrets/{NAME}", "'..' step"),
    (LOCAL, f"file:///srv/rs/outputs-other/{NAME}", "not under"),
    (LOCAL, f"file://srv/rs/outputs/{NAME}", "not absolute"),
    (LOCAL, "file:///srv/rs/outputs/J/R/passwd", "does not name a run log"),
    (LOCAL, f"s3://acme-logs/raftsched/{NAME}", "not S3"),
    (LOCAL, f"mem://{NAME}", "scheme 'mem'"),
    (LOCAL, f"http://169.254.169.254/{NAME}", "scheme 'http'"),
    (LOCAL, "data:text/plain,hello", "not a URI"),
    (LOCAL, "/srv/rs/outputs/" + NAME, "not a URI"),
    (S3, f"s3://other-bucket/raftsched/{NAME}", "bucket 'other-bucket'"),
    (S3, f"s3://acme-logs/elsewhere/{NAME}", "not under the prefix 'raftsched'"),
    (S3, f"s3://acme-logs/raftsched-x/{NAME}", "not under the prefix"),
    (S3, f"s3://acme-logs/raftsched/../x/{NAME}", "'..' step"),
    (S3, f"file:///srv/rs/outputs/{NAME}", "not a local directory"),
    (LOCAL, "file:///srv/rs/outputs/" + "x/" * 2000 + NAME, "log_uri is"),
]


@pytest.mark.parametrize("location, uri", ACCEPTED)
def test_uris_inside_the_store_are_accepted(location: OutputLocation, uri: str) -> None:
    location.check(uri)
    assert location.allows(uri)


@pytest.mark.parametrize("location, uri, why", REFUSED)
def test_uris_outside_the_store_are_refused_naming_it(location: OutputLocation, uri: str, why: str) -> None:
    with pytest.raises(ValidationError, match="log_uri") as err:
        location.check(uri)
    assert why in str(err.value)
    assert not location.allows(uri)


def _log(root: str, rel: str, text: bytes) -> str:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(text)
    return path


def test_the_reader_reads_only_inside_the_store(tmp_path: Path) -> None:
    root, outside = str(tmp_path / "outputs"), str(tmp_path / "secret")
    inside = _log(root, NAME, b"the log")
    secret = _log(outside, NAME, b"a secret")
    reader = OutputReader(location=OutputLocation(local_dir=root))
    assert reader.read("file://" + inside) == (b"the log", b"")
    with pytest.raises(OutputMissing, match="outside this node's output store"):
        reader.read("file://" + secret)
    link = os.path.join(root, "J2/R/attempt-1-token-1.log")
    os.makedirs(os.path.dirname(link))
    os.symlink(secret, link)
    with pytest.raises(OutputMissing, match="leads outside this node's output directory"):
        reader.read("file://" + link)
    with pytest.raises(OutputMissing, match="outside"):
        reader.read(f"s3://acme-logs/raftsched/{NAME}")
    assert OutputReader().read("file://" + secret) == (b"a secret", b"")  # no location: tools and tests only


def test_the_janitor_deletes_only_inside_the_store(tmp_path: Path) -> None:
    root, outside = str(tmp_path / "outputs"), str(tmp_path / "other")
    inside, other = _log(root, NAME, b"x"), _log(outside, NAME, b"y")
    deleted: list[str] = []

    class S3:
        def delete_objects(self, Bucket: str, Delete: dict) -> None:  # noqa: N803 - boto3's names
            deleted.append(Bucket)

    janitor = OutputJanitor(lambda: True, lambda: S3(), OutputLocation(local_dir=root))
    janitor.delete("file://" + other)
    janitor.delete(f"s3://any-bucket/raftsched/{NAME}")
    assert os.path.exists(other) and deleted == []
    janitor.delete("file://" + inside)
    assert not os.path.exists(inside)


def test_a_completion_names_exactly_its_own_attempts_place() -> None:
    from raftsched.cluster.domain.output import OutputKey

    key = OutputKey("J", "R", 1, 1001)
    LOCAL.check_attempt(f"file:///srv/rs/outputs/{NAME}", key)
    LOCAL.check_attempt(f"file:///srv/rs//outputs/./{NAME}", key)  # the same path, spelled loosely
    LOCAL.check_attempt(f"file:///srv/rs/outputs/exec-1/{NAME}", key)  # an executor's own folder in the store
    S3.check_attempt(f"s3://acme-logs/raftsched/{NAME}", key)
    S3.check_attempt(f"s3://acme-logs/raftsched/team-a/{NAME}", key)
    for uri in ("", "data:,"):
        LOCAL.check_attempt(uri, key)
    for uri in (
        "file:///srv/rs/outputs/J/OTHER/attempt-1-token-1001.log",  # another run's
        "file:///srv/rs/outputs/K/R/attempt-1-token-1001.log",  # another job's
        "file:///srv/rs/outputs/J/R/attempt-2-token-1001.log",  # another attempt's
        "file:///srv/rs/outputs/J/R/attempt-1-token-1002.log",
        "file:///srv/rs/outputs/J/R/x/attempt-1-token-1001.log",
        "s3://acme-logs/raftsched/J/R2/attempt-1-token-1001.log",
    ):
        with pytest.raises(ValidationError, match="is not this attempt's output"):
            (S3 if uri.startswith("s3") else LOCAL).check_attempt(uri, key)


def test_the_janitor_deletes_a_pruned_runs_log_only_inside_that_runs_folder(tmp_path: Path) -> None:
    from types import SimpleNamespace

    root = str(tmp_path / "outputs")
    theirs = _log(root, "OTHER/RUN/attempt-1-token-5.log", b"another team's log")
    ours = _log(root, "J/R/attempt-1-token-1001.log", b"ours")
    janitor = OutputJanitor(lambda: True, None, OutputLocation(local_dir=root))
    forged = SimpleNamespace(job_id="J", run_id="R", attempt=1, log_uri="file://" + theirs)
    janitor.on_applied([("pruned", forged)])
    own = SimpleNamespace(job_id="J", run_id="R", attempt=1, log_uri="file://" + ours)
    janitor.on_applied([("pruned", own)])
    deadline = time.monotonic() + 5
    while os.path.exists(ours) and time.monotonic() < deadline:  # the janitor deletes on a thread of its own
        time.sleep(0.05)
    assert not os.path.exists(ours)
    assert os.path.exists(theirs), "the janitor deleted another run's log"
