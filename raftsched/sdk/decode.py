"""A task's payload decoded into the type its handler's annotation names.

``decode_payload(data, hint)``:

* no annotation, ``Any`` or ``object``: JSON decoded where it is JSON, else
  text, else bytes (``raftsched.sdk.codec.decode``);
* ``bytes``: the payload as it is; ``str``: the payload as UTF-8 text;
* anything else: the payload read as JSON, then checked and converted to
  ``hint`` — dataclasses (nested ones too: each field by its annotation,
  defaults for the missing optional ones, unknown keys ignored), TypedDicts
  (required keys checked), ``dict[K, V]``, ``list[T]``, ``tuple``, ``set``,
  ``X | None``, unions, ``Literal``, enums, ``int``/``float``/``str``/
  ``bool``, ``datetime``/``date`` (ISO text), ``timedelta`` (seconds or
  ``"5m"``), ``UUID``, ``Decimal``, and a pydantic model (its own
  ``model_validate``) when the program uses pydantic — the SDK never imports
  it.

What does not fit raises ``PayloadError`` naming the field (``customer.id``,
``items[2].sku``) and what was expected; a worker fails such a run at once,
as no retry can change the payload.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import inspect
import json
import types
import typing
import uuid
from collections import abc
from typing import Any

from raftsched.cluster.domain.errors import RaftschedError as _Root
from raftsched.sdk import codec
from raftsched.sdk.durations import span_ms


class PayloadError(_Root, ValueError):
    """A payload that does not fit its handler's annotation; ``field`` is where (``""``: the whole payload)."""

    def __init__(self, field: str, problem: str, into: str = "") -> None:
        self.field = field
        self.problem = problem
        where = f"field {field!r}: " if field else ""
        target = f" into {into}" if into else ""
        super().__init__(f"cannot decode the payload{target}: {where}{problem}")


class _Mismatch(Exception):
    """Raised inside the conversion; ``PayloadError`` once the path is known."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


_UNTYPED = (inspect.Parameter.empty, Any, object)


def decode_payload(data: bytes, hint: Any) -> Any:
    """``data`` as a value of type ``hint`` (see the module); ``PayloadError`` when it does not fit."""
    if hint in _UNTYPED:
        return codec.decode(data)
    if hint is bytes:
        return bytes(data)
    if hint is str:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PayloadError("", f"not UTF-8 text ({exc.reason} at byte {exc.start})", "str") from None
    into = type_name(hint)
    if not data:
        value = None
    else:
        try:
            value = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise PayloadError("", f"not JSON ({exc}); annotate the payload as bytes or str to take it as it is", into) from None
    try:
        return convert(value, hint, "")
    except _Mismatch as exc:
        raise PayloadError(exc.path, exc.problem, into) from None


def convert(value: Any, hint: Any, path: str) -> Any:
    """``value`` (decoded JSON) as ``hint``; ``_Mismatch`` at ``path`` when it does not fit."""
    if hint in _UNTYPED:
        return value
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return convert(value, typing.get_args(hint)[0], path)
    if hasattr(hint, "__supertype__"):  # typing.NewType
        return convert(value, hint.__supertype__, path)
    if origin is typing.Union or origin is types.UnionType:
        return _union(value, typing.get_args(hint), path)
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise _Mismatch(path, f"expected one of {', '.join(map(repr, typing.get_args(hint)))}, got {_shown(value)}")
    if hint is type(None) or hint is None:
        if value is None:
            return None
        raise _Mismatch(path, f"expected null, got {_shown(value)}")
    if origin is not None:
        return _generic(value, origin, typing.get_args(hint), path)
    if isinstance(hint, type):
        return _class(value, hint, path)
    raise _Mismatch(path, f"cannot decode into {type_name(hint)}")


def _union(value: Any, options: tuple[Any, ...], path: str) -> Any:
    if value is None and type(None) in options:
        return None
    problems = []
    for option in options:
        if option is type(None):
            continue
        try:
            return convert(value, option, path)
        except _Mismatch as exc:
            problems.append(exc)
    if len(problems) == 1:
        raise problems[0]
    raise _Mismatch(path, f"expected {' or '.join(type_name(o) for o in options)}, got {_shown(value)}")


_SCALARS: dict[type, str] = {bool: "true or false", int: "an integer", float: "a number", str: "text"}


def _class(value: Any, hint: type, path: str) -> Any:
    if hint in _SCALARS:
        return _scalar(value, hint, path)
    if dataclasses.is_dataclass(hint):
        return _dataclass(value, hint, path)
    if typing.is_typeddict(hint):
        return _typeddict(value, hint, path)
    validate = getattr(hint, "model_validate", None)  # pydantic 2 (or its v1 API: parse_obj)
    validate = validate if callable(validate) else getattr(hint, "parse_obj", None)
    if callable(validate):
        return _pydantic(value, validate, path)
    if issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in hint)
            raise _Mismatch(path, f"expected one of {allowed} ({hint.__name__}), got {_shown(value)}") from None
    if hint in (dict, list, tuple, set, frozenset):
        return _generic(value, hint, (), path)
    return _special(value, hint, path)


def _scalar(value: Any, hint: type, path: str) -> Any:
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    raise _Mismatch(path, f"expected {_SCALARS[hint]} ({hint.__name__}), got {_shown(value)}")


def _special(value: Any, hint: type, path: str) -> Any:
    """datetime, date, timedelta, UUID, Decimal; else the value when it already is one."""
    try:
        if hint is dt.datetime and isinstance(value, str):
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if hint is dt.date and isinstance(value, str):
            return dt.date.fromisoformat(value)
        if hint is dt.timedelta and isinstance(value, (int, float, str)) and not isinstance(value, bool):
            return dt.timedelta(milliseconds=span_ms(value, path or "payload"))
        if hint in (uuid.UUID, decimal.Decimal) and isinstance(value, (str, int)) and not isinstance(value, bool):
            return hint(value) if hint is decimal.Decimal else hint(str(value))
    except (ValueError, TypeError, decimal.InvalidOperation) as exc:
        raise _Mismatch(path, f"expected {type_name(hint)}, got {_shown(value)} ({exc})") from None
    if isinstance(value, hint):
        return value
    raise _Mismatch(path, f"expected {type_name(hint)}, got {_shown(value)}")


def _fields_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - an annotation naming what its module cannot resolve
        raise _Mismatch("", f"cannot read the annotations of {cls.__name__}: {exc}") from None


def _dataclass(value: Any, cls: type, path: str) -> Any:
    if not isinstance(value, dict):
        raise _Mismatch(path, f"expected an object (for {cls.__name__}), got {_shown(value)}")
    hints = _fields_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        where = _join(path, f.name)
        if f.name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _Mismatch(where, f"missing (a required field of {cls.__name__})")
            continue
        kwargs[f.name] = convert(value[f.name], hints.get(f.name, Any), where)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:  # its __post_init__ refused the values
        raise _Mismatch(path, f"{cls.__name__} refused the values: {exc}") from None


def _typeddict(value: Any, cls: type, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Mismatch(path, f"expected an object (for {cls.__name__}), got {_shown(value)}")
    hints = _fields_hints(cls)
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset(hints))
    for key in sorted(required):
        if key not in value:
            raise _Mismatch(_join(path, key), f"missing (a required key of {cls.__name__})")
    return {key: convert(item, hints[key], _join(path, key)) if key in hints else item for key, item in value.items()}


def _pydantic(value: Any, validate: Any, path: str) -> Any:
    try:
        return validate(value)
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, without importing pydantic
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) and errors() else None
        if first:
            where = path
            for part in first.get("loc", ()):
                where = f"{where}[{part}]" if isinstance(part, int) else _join(where, str(part))
            raise _Mismatch(where, str(first.get("msg", exc))) from None
        raise _Mismatch(path, str(exc)) from None


def _generic(value: Any, origin: Any, args: tuple[Any, ...], path: str) -> Any:
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        if not isinstance(value, dict):
            raise _Mismatch(path, f"expected an object, got {_shown(value)}")
        key_hint, item_hint = args if len(args) == 2 else (Any, Any)
        return {
            convert(_key(k, key_hint), key_hint, _join(path, k)): convert(v, item_hint, _join(path, k)) for k, v in value.items()
        }
    if origin in (list, tuple, set, frozenset, abc.Sequence, abc.MutableSequence, abc.Set, abc.Collection, abc.Iterable):
        if not isinstance(value, list):
            raise _Mismatch(path, f"expected a list, got {_shown(value)}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise _Mismatch(path, f"expected a list of {len(args)} items, got {len(value)}")
            return tuple(convert(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        item_hint = args[0] if args else Any
        items = [convert(v, item_hint, f"{path}[{i}]") for i, v in enumerate(value)]
        if origin is tuple:
            return tuple(items)
        if origin in (set, abc.Set):
            return set(items)
        return frozenset(items) if origin is frozenset else items
    if isinstance(origin, type):
        return _class(value, origin, path)
    raise _Mismatch(path, f"cannot decode into {origin}")


def _key(key: str, hint: Any) -> Any:
    """JSON object keys are text: an ``int`` key is read from its digits."""
    if hint is int:
        try:
            return int(key)
        except ValueError:
            return key
    return key


def _join(path: str, name: Any) -> str:
    return f"{path}.{name}" if path else str(name)


def _shown(value: Any) -> str:
    kind = {dict: "an object", list: "a list", str: "text", bool: "a boolean", type(None): "null"}.get(type(value))
    kind = kind or ("a number" if isinstance(value, (int, float)) else type(value).__name__)
    text = repr(value)
    return kind if isinstance(value, (dict, list)) or value is None else f"{kind} {text[:60]}"


def type_name(hint: Any) -> str:
    """``hint`` as people write it: ``ReportArgs``, ``list[int]``, ``str | None``."""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "")
