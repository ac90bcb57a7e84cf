"""A package's names loaded when first used (PEP 562's module ``__getattr__``): importing the package costs
nothing until one of them is asked for, and then only the module that defines it loads."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_getattr(package: str, where: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: name -> the submodule (of ``where``) that defines it, imported when
    first asked for, and the value kept in ``namespace`` (the package's globals) so it is looked up once."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
