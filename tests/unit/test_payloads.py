"""Built-in types' payloads are checked at create: a job no executor could ever run is INVALID_ARGUMENT."""

from __future__ import annotations

import json

import pytest

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import Every, JobSpec
from raftsched.cluster.domain.payloads import (
    HTTP_SHAPE,
    SHELL_SHAPE,
    HttpPayload,
    ShellPayload,
    parse_http_payload,
    parse_shell_payload,
    validate_payload,
)
from raftsched.cluster.domain.validation import validate_spec

pytestmark = pytest.mark.unit


def js(value: object) -> bytes:
    return json.dumps(value).encode()


def test_good_shell_payloads_parse() -> None:
    assert parse_shell_payload(js({"command": "echo hi"})) == ShellPayload("echo hi")
    full = parse_shell_payload(js({"command": "make", "env": {"A": "1", "B_2": ""}, "cwd": "/tmp"}))
    assert full == ShellPayload("make", {"A": "1", "B_2": ""}, "/tmp")
    assert parse_shell_payload(js({"command": "x", "env": None, "cwd": None})) == ShellPayload("x")


def test_good_http_payloads_parse() -> None:
    assert parse_http_payload(js({"url": "https://example.com/hook"})) == HttpPayload("https://example.com/hook")
    full = parse_http_payload(js({"url": "http://[::1]:8080/x?y=1", "method": "post", "headers": {"X-Key": "v"}, "body": "{}"}))
    assert full == HttpPayload("http://[::1]:8080/x?y=1", "POST", {"X-Key": "v"}, "{}")


SHELL_BAD = [
    (b"echo hi", "must be a UTF-8 JSON object"),  # the mistake the issue names: a bare command
    (b"", "got an empty payload"),
    (b"\xff\xfe", "must be a UTF-8 JSON object"),
    (js(["echo", "hi"]), "must be a UTF-8 JSON object"),
    (js({"cmd": "echo"}), "unknown field\\(s\\) 'cmd'"),
    (js({}), "needs a non-empty string 'command'"),
    (js({"command": "   "}), "needs a non-empty string 'command'"),
    (js({"command": ["echo", "hi"]}), "needs a non-empty string 'command'"),
    (js({"command": "a\x00b"}), "NUL character"),
    (js({"command": "x", "env": ["A=1"]}), "'env' must be an object of strings"),
    (js({"command": "x", "env": {"A": 1}}), "'env' must be an object of strings"),
    (js({"command": "x", "env": {"A=B": "1"}}), "invalid name 'A=B'"),
    (js({"command": "x", "env": {"": "1"}}), "invalid name ''"),
    (js({"command": "x", "cwd": 3}), "needs a string 'cwd'"),
]


@pytest.mark.parametrize("payload,match", SHELL_BAD)
def test_bad_shell_payloads_name_the_expected_shape(payload: bytes, match: str) -> None:
    with pytest.raises(ValidationError, match=match) as info:
        validate_payload("shell", payload)
    assert "shell" in str(info.value)


HTTP_BAD = [
    (b"https://example.com", "must be a UTF-8 JSON object"),
    (js({"url": "file:///etc/hostname"}), "only http:// and https:// URLs"),
    (js({"url": "ftp://example.com/x"}), "only http:// and https:// URLs"),
    (js({"url": "gopher://x"}), "only http:// and https:// URLs"),
    (js({"url": "https://"}), "names no host"),
    (js({"url": "http://example.com:99999/"}), "is not valid"),
    (js({"url": "http://exa mple.com/"}), "whitespace or control"),
    (js({"method": "GET"}), "needs a non-empty string 'url'"),
    (js({"url": "http://x", "method": "GET /evil HTTP/1.1\r\n"}), "is not an HTTP method"),
    (js({"url": "http://x", "headers": {"X": "a\r\nEvil: 1"}}), "line break"),
    (js({"url": "http://x", "headers": {"Bad Name": "1"}}), "invalid name 'Bad Name'"),
    (js({"url": "http://x", "headers": ["X: 1"]}), "'headers' must be an object of strings"),
    (js({"url": "http://x", "body": {"a": 1}}), "needs a string 'body'"),
    (js({"url": "http://x", "timeout": 3}), "unknown field\\(s\\) 'timeout'"),
]


@pytest.mark.parametrize("payload,match", HTTP_BAD)
def test_bad_http_payloads_name_the_expected_shape(payload: bytes, match: str) -> None:
    with pytest.raises(ValidationError, match=match) as info:
        validate_payload("http", payload)
    assert "http" in str(info.value)


def test_messages_show_the_shape_and_other_types_are_the_handlers_business() -> None:
    with pytest.raises(ValidationError) as info:
        validate_payload("shell", b"echo hi")
    assert SHELL_SHAPE in str(info.value) and "'echo hi'" in str(info.value)
    with pytest.raises(ValidationError) as info:
        validate_payload("http", js({}))
    assert HTTP_SHAPE in str(info.value)
    validate_payload("report", b"\x00 anything at all")
    validate_payload("noop", b"")


def test_the_executor_parses_leniently_what_a_newer_node_may_add() -> None:
    assert parse_shell_payload(js({"command": "x", "stdin": "later"}), strict=False) == ShellPayload("x")
    with pytest.raises(ValidationError):
        parse_http_payload(js({"url": "file:///etc/passwd", "new": 1}), strict=False)  # the scheme, always


def test_validate_spec_checks_the_payload_last() -> None:
    with pytest.raises(ValidationError, match="shell job's payload"):
        validate_spec(JobSpec("j", Every(60_000), type="shell", payload=b"echo hi"))
    validate_spec(JobSpec("j", Every(60_000), type="shell", payload=js({"command": "echo hi"})))
