"""Dependencies tell the truth: every requirement is pinned in constraints.txt at a version it admits,
and what every replica must compute identically is pinned exactly in pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
#: replicas compute cron instants and speak pysyncobj's log: these must be the same on every node
EXACT = {"pysyncobj", "croniter", "tzdata"}


def _requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return reqs


def _pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = version
    return pins


def test_every_requirement_is_pinned_at_a_version_it_admits() -> None:
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in constraints.txt: run scripts/lock.sh"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[name]}, which pyproject.toml's {req} does not admit: run scripts/lock.sh"
        )


def test_what_replicas_compute_with_is_pinned_exactly() -> None:
    runtime = {canonicalize_name(Requirement(r).name): Requirement(r) for r in _project_dependencies()}
    for name in EXACT:
        spec = list(runtime[name].specifier)
        assert len(spec) == 1 and spec[0].operator == "==", f"{name} must be pinned exactly (==) in pyproject.toml"


def test_protobuf_and_grpc_floors_match_the_generated_code() -> None:
    runtime = {canonicalize_name(Requirement(r).name): Requirement(r) for r in _project_dependencies()}
    generated = (REPO / "protos/raftsched/v1/scheduler_pb2.py").read_text()
    gencode = generated.split("# Protobuf Python Version: ", 1)[1].split()[0]
    assert runtime["protobuf"].specifier.contains(gencode) and not runtime["protobuf"].specifier.contains("5.26.0")
    grpc_generated = (REPO / "protos/raftsched/v1/scheduler_pb2_grpc.py").read_text()
    grpc_version = grpc_generated.split("GRPC_GENERATED_VERSION = '", 1)[1].split("'")[0]
    assert runtime["grpcio"].specifier.contains(grpc_version) and not runtime["grpcio"].specifier.contains("1.60.0")


def _project_dependencies() -> list[str]:
    return list(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
