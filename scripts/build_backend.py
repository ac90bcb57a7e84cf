"""raftsched's build backend: setuptools' own, with its scratch folders kept out of the source tree.

setuptools writes ``build/`` and ``raftsched.egg-info/`` into the tree it
builds from, so a plain ``pip install .`` (or ``pip install -e .``, ``pip
wheel .``, ``python -m build``) left both in a checkout. Every hook here runs
setuptools' hook of the same name with those two folders in a temporary
folder of its own, removed when the hook returns: setuptools reads the file
named by ``DIST_EXTRA_CONFIG`` as one more configuration file, and that file
sets ``[build] build_base`` and ``[egg_info] egg_base``. What is built is
exactly what setuptools builds.

pyproject.toml names it (``build-backend = "build_backend"``, ``backend-path
= ["scripts"]``); MANIFEST.in puts it into the sdist, so a wheel builds from
the sdist as from the checkout.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Callable, Iterator

from setuptools import build_meta as _setuptools

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]


@contextlib.contextmanager
def scratch_outside_the_tree() -> Iterator[str]:
    """A temporary folder that setuptools' ``build`` and ``egg_info`` write into while the block runs."""
    with tempfile.TemporaryDirectory(prefix="raftsched-build-") as scratch:
        config = os.path.join(scratch, "scratch.cfg")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f"[build]\nbuild_base = {os.path.join(scratch, 'build')}\n[egg_info]\negg_base = {scratch}\n")
        before = os.environ.get("DIST_EXTRA_CONFIG")
        os.environ["DIST_EXTRA_CONFIG"] = config
        try:
            yield scratch
        finally:
            if before is None:
                os.environ.pop("DIST_EXTRA_CONFIG", None)
            else:
                os.environ["DIST_EXTRA_CONFIG"] = before


def _outside(name: str) -> Callable[..., Any]:
    hook = getattr(_setuptools, name)

    def run(*args: Any, **kwargs: Any) -> Any:
        with scratch_outside_the_tree():
            return hook(*args, **kwargs)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"setuptools' ``{name}``, its build/ and egg-info/ folders outside the source tree."
    return run


get_requires_for_build_wheel = _outside("get_requires_for_build_wheel")
get_requires_for_build_sdist = _outside("get_requires_for_build_sdist")
get_requires_for_build_editable = _outside("get_requires_for_build_editable")
prepare_metadata_for_build_wheel = _outside("prepare_metadata_for_build_wheel")
prepare_metadata_for_build_editable = _outside("prepare_metadata_for_build_editable")
build_wheel = _outside("build_wheel")
build_sdist = _outside("build_sdist")
build_editable = _outside("build_editable")
