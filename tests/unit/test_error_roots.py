"""Every exception raftsched raises on purpose has one of the two roots: ``RaftError`` inside ``raft/`` (which
knows nothing of jobs), ``RaftschedError`` everywhere else (``raftsched.cluster.domain.errors``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import raftsched
from raftsched.cluster.domain.errors import RaftschedError
from raftsched.raft.errors import RaftError

pytestmark = pytest.mark.unit

#: the gRPC client's errors: a grpc.RpcError of its own, and its wrapper of one, raised to code that catches grpc's
OUTSIDE = {"raftsched.rpc.client.errors.ClusterUnreachable", "raftsched.rpc.client.errors.RpcFailure"}


def _exceptions() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(raftsched.__path__, "raftsched."):
        if ".protos." in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
                if not name.startswith("_"):
                    found.append(value)
    return found


def test_every_exception_has_one_of_the_two_roots() -> None:
    found = _exceptions()
    assert len(found) > 20
    stray = []
    for cls in found:
        name = f"{cls.__module__}.{cls.__qualname__}"
        root = RaftError if cls.__module__.startswith("raftsched.raft.") else RaftschedError
        if not issubclass(cls, root) and name not in OUTSIDE:
            stray.append(f"{name} (derive it from {root.__name__})")
    assert stray == [], "exceptions outside the error roots: " + ", ".join(stray)
