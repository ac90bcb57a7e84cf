"""What the command line adds to a gRPC error: a hint that points at the cause (raftsched.rpc.client.errors.describe)."""

from __future__ import annotations

import grpc
import pytest

from raftsched.rpc.client.errors import describe

pytestmark = pytest.mark.unit


class _Error(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_a_connection_never_answered_is_a_dead_node_not_a_tls_problem() -> None:
    """Seen by tests/fault/test_three_hosts.py: a dead machine's address, which drops packets."""
    text = describe(
        _Error(
            grpc.StatusCode.UNAVAILABLE,
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.213.0.1:50051: tcp handshaker shutdown",
        )
    )
    assert "no answer from the node" in text and "TLS" not in text


def test_a_failed_tls_handshake_says_check_the_ca() -> None:
    text = describe(_Error(grpc.StatusCode.UNAVAILABLE, "failed to connect: Ssl handshake failed: CERTIFICATE_VERIFY_FAILED"))
    assert "a TLS problem: check --ca-file" in text
