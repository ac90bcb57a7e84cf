"""The SDK's conversions without a network: spans and instants, payloads and results as bytes, and a payload
decoded into its handler's annotation (dataclasses, nested ones, TypedDict, containers, pydantic)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from typing import Literal, Optional, TypedDict

import pytest

from raftsched.sdk import codec
from raftsched.sdk.decode import PayloadError, decode_payload
from raftsched.sdk.durations import instant_ms, span_ms, to_datetime

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- spans and instants


@pytest.mark.parametrize(
    "value, ms",
    [
        ("10s", 10_000),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("1d", 86_400_000),
        ("500ms", 500),
        (dt.timedelta(minutes=2), 120_000),
        (30, 30_000),
        (1.5, 1_500),
    ],
)
def test_spans_take_timedelta_seconds_and_the_command_lines_text(value: object, ms: int) -> None:
    assert span_ms(value, "every") == ms  # type: ignore[arg-type]


def test_a_span_without_a_unit_or_of_another_type_is_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match=r"every= 10: a span needs a unit: say 10s"):
        span_ms("10", "every")
    with pytest.raises(ValueError, match="after="):
        span_ms("soon", "after")
    with pytest.raises(TypeError, match="timeout=True"):
        span_ms(True, "timeout")
    with pytest.raises(TypeError, match="lease_ttl="):
        span_ms([1], "lease_ttl")  # type: ignore[arg-type]


def test_instants_are_aware_datetimes_or_iso_text_and_a_naive_one_is_refused() -> None:
    when = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert instant_ms(when, "at") == int(when.timestamp() * 1000)
    assert instant_ms("2030-01-02T03:04:05Z", "at") == int(when.timestamp() * 1000)
    assert instant_ms("2030-01-02T04:04:05+01:00", "at") == int(when.timestamp() * 1000)
    assert to_datetime(instant_ms(when, "at")) == when
    with pytest.raises(ValueError, match="naive datetime: say which zone"):
        instant_ms(dt.datetime(2030, 1, 2), "at")
    with pytest.raises(ValueError, match="has no zone"):
        instant_ms("2030-01-02T03:04:05", "at")


# ---------------------------------------------------------------- bytes on the wire


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


def test_payloads_and_results_go_out_as_bytes_text_or_json() -> None:
    assert codec.encode(None) == b""
    assert codec.encode(b"\x00raw") == b"\x00raw"
    assert codec.encode("text") == b"text"
    assert codec.encode({"a": [1, 2], "b": None}) == b'{"a":[1,2],"b":null}'
    assert codec.encode(Point(1, 2)) == b'{"x":1,"y":2}'
    assert codec.encode({"at": dt.date(2030, 1, 2), "s": {3}}) == b'{"at":"2030-01-02","s":[3]}'
    with pytest.raises(TypeError, match="payload cannot be sent as JSON"):
        codec.encode({"f": object()}, "payload")


def test_results_come_back_as_json_where_they_are_json_else_text_else_bytes() -> None:
    assert codec.decode(b"") is None
    assert codec.decode(b'{"rows": 120}') == {"rows": 120}
    assert codec.decode(b"42") == 42
    assert codec.decode(b"plain words") == "plain words"
    assert codec.decode(b"\xff\xfe") == b"\xff\xfe"


# ---------------------------------------------------------------- typed payloads


@dataclasses.dataclass
class Customer:
    id: int
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ReportArgs:
    day: str
    customer: Customer
    limit: Optional[int] = None
    mode: Literal["fast", "full"] = "fast"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Order(TypedDict):
    sku: str
    qty: int


def test_a_dataclass_payload_is_decoded_with_its_nested_dataclasses_and_defaults() -> None:
    data = b'{"day": "yesterday", "customer": {"id": 7, "tags": ["a"]}, "extra": "ignored"}'
    args = decode_payload(data, ReportArgs)
    assert args == ReportArgs("yesterday", Customer(7, ["a"]), None, "fast")


def test_a_field_that_does_not_fit_is_named_with_its_path() -> None:
    with pytest.raises(PayloadError, match=r"into ReportArgs: field 'customer.id': expected an integer \(int\), got text 'x'"):
        decode_payload(b'{"day": "d", "customer": {"id": "x"}}', ReportArgs)
    with pytest.raises(PayloadError, match=r"field 'customer': missing \(a required field of ReportArgs\)"):
        decode_payload(b'{"day": "d"}', ReportArgs)
    with pytest.raises(PayloadError, match=r"field 'customer.tags\[1\]': expected text"):
        decode_payload(b'{"day": "d", "customer": {"id": 1, "tags": ["a", 2]}}', ReportArgs)
    with pytest.raises(PayloadError, match=r"field 'mode': expected one of 'fast', 'full'"):
        decode_payload(b'{"day": "d", "customer": {"id": 1}, "mode": "slow"}', ReportArgs)
    with pytest.raises(PayloadError, match="not JSON"):
        decode_payload(b"day=d", ReportArgs)
    with pytest.raises(PayloadError) as caught:
        decode_payload(b'{"day": 3, "customer": {"id": 1}}', ReportArgs)
    assert caught.value.field == "day"


def test_typeddict_containers_enums_and_scalars() -> None:
    assert decode_payload(b'{"sku": "A", "qty": 2}', Order) == {"sku": "A", "qty": 2}
    with pytest.raises(PayloadError, match=r"field 'qty': missing"):
        decode_payload(b'{"sku": "A"}', Order)
    assert decode_payload(b'{"a": 1}', dict) == {"a": 1}
    assert decode_payload(b'{"1": [1.5, 2]}', dict[int, list[float]]) == {1: [1.5, 2.0]}
    assert decode_payload(b"[[1, 2], [3, 4]]", list[tuple[int, int]]) == [(1, 2), (3, 4)]
    assert decode_payload(b'"blue"', Color) is Color.BLUE
    assert decode_payload(b"null", Optional[int]) is None
    assert decode_payload(b'"2030-01-02T03:04:05Z"', dt.datetime) == dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert decode_payload(b'"5m"', dt.timedelta) == dt.timedelta(minutes=5)
    with pytest.raises(PayloadError, match="expected an integer"):
        decode_payload(b"true", int)


def test_str_bytes_and_unannotated_payloads_are_taken_as_they_are() -> None:
    assert decode_payload(b"not json", str) == "not json"
    assert decode_payload(b"\xff", bytes) == b"\xff"
    assert decode_payload(b'{"a": 1}', object) == {"a": 1}
    with pytest.raises(PayloadError, match="not UTF-8 text"):
        decode_payload(b"\xff", str)


def test_a_pydantic_model_uses_its_own_validation_when_pydantic_is_there() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Invoice(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        number: int
        lines: list[str]

    assert decode_payload(b'{"number": 3, "lines": ["x"]}', Invoice) == Invoice(number=3, lines=["x"])
    with pytest.raises(PayloadError, match=r"field 'lines\[0\]'"):
        decode_payload(b'{"number": 3, "lines": [{}]}', Invoice)
    assert codec.encode(Invoice(number=1, lines=[])) == b'{"number":1,"lines":[]}'
