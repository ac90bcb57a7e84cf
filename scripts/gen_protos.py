#!/usr/bin/env python3
"""Generate the Python gRPC code of raftsched from its one proto file.

This is the only way the generated modules are made::

    python scripts/gen_protos.py            # regenerate in place
    python scripts/gen_protos.py --check    # fail if the committed code is stale

It runs, from the repository root::

    python -m grpc_tools.protoc -I <repo root> -I <grpc_tools' bundled protos>
        --python_out=<out> --pyi_out=<out> --grpc_python_out=<out>
        raftsched/protos/raftsched/v1/scheduler.proto

(the proto named through the ``raftsched/protos`` link to ``protos/``, so that the
generated modules are ``raftsched.protos.raftsched.v1.*``, the names the package is
installed under) which writes ``protos/raftsched/v1/scheduler_pb2.py``, ``scheduler_pb2.pyi``
and ``scheduler_pb2_grpc.py``; they import each other as
``raftsched.protos.raftsched.v1.scheduler_pb2``. The files are exactly protoc's output:
nothing is added or rewritten, so ``--check`` can compare them byte for byte.

Generated code depends on the generator's version, so the script refuses to
run with any grpcio-tools other than ``GRPCIO_TOOLS_VERSION``.

Exit status: 0 on success, 1 when ``--check`` finds a stale or missing file,
2 when the script cannot run (wrong grpcio-tools, protoc error).
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

#: The one grpcio-tools release whose output is committed.
GRPCIO_TOOLS_VERSION = "1.85.1"

REPO_ROOT: Path = Path(__file__).resolve().parent.parent
#: The proto file, relative to the repository root (which is protoc's -I).
PROTO: str = "raftsched/protos/raftsched/v1/scheduler.proto"
#: What protoc writes for PROTO, relative to the output root.
GENERATED: tuple[str, ...] = (
    "raftsched/protos/raftsched/v1/scheduler_pb2.py",
    "raftsched/protos/raftsched/v1/scheduler_pb2.pyi",
    "raftsched/protos/raftsched/v1/scheduler_pb2_grpc.py",
)
REGENERATE_COMMAND = "python scripts/gen_protos.py"


class GenerationError(Exception):
    """The code could not be generated; the message says why."""


def installed_grpcio_tools_version() -> str | None:
    """The installed grpcio-tools version, or None when it is not installed."""
    try:
        return metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        return None


def check_grpcio_tools_version() -> None:
    """Raise GenerationError unless the pinned grpcio-tools is installed."""
    found = installed_grpcio_tools_version()
    if found is None:
        raise GenerationError(
            f"grpcio-tools is not installed in {sys.executable}; "
            f"install the pinned version: pip install grpcio-tools=={GRPCIO_TOOLS_VERSION}"
        )
    if found != GRPCIO_TOOLS_VERSION:
        raise GenerationError(
            f"grpcio-tools {found} is installed but the generated code is pinned to "
            f"grpcio-tools {GRPCIO_TOOLS_VERSION} (GRPCIO_TOOLS_VERSION in {Path(__file__).name}); "
            f"install it with: pip install grpcio-tools=={GRPCIO_TOOLS_VERSION}"
        )


def bundled_include_dir() -> Path:
    """grpc_tools' own copy of the well-known protos (google/protobuf/*.proto)."""
    import grpc_tools  # imported late: the version check names a missing package better

    include = Path(grpc_tools.__file__).resolve().parent / "_proto"
    if not (include / "google" / "protobuf" / "timestamp.proto").is_file():
        raise GenerationError(f"grpc_tools has no bundled google/protobuf protos under {include}")
    return include


def generate(out_dir: Path) -> None:
    """Run protoc on PROTO, writing the generated modules under ``out_dir``."""
    out = str(out_dir)
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        "-I",
        str(REPO_ROOT),
        "-I",
        str(bundled_include_dir()),
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        PROTO,
    ]
    proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise GenerationError(f"protoc failed (exit {proc.returncode}) on {PROTO}:\n{proc.stderr.strip() or proc.stdout.strip()}")
    missing = [name for name in GENERATED if not (out_dir / name).is_file()]
    if missing:
        raise GenerationError(f"protoc did not write {', '.join(missing)}")


def stale_files(fresh_root: Path) -> list[tuple[str, str]]:
    """Compare fresh output with the committed files: (path, reason) for each that differs."""
    stale: list[tuple[str, str]] = []
    for name in GENERATED:
        committed = REPO_ROOT / name
        fresh = (fresh_root / name).read_bytes()
        if not committed.is_file():
            stale.append((name, "missing"))
            continue
        current = committed.read_bytes()
        if current != fresh:
            diff = difflib.unified_diff(
                current.decode("utf-8", "replace").splitlines(),
                fresh.decode("utf-8", "replace").splitlines(),
                fromfile=f"{name} (committed)",
                tofile=f"{name} (generated from {PROTO})",
                lineterm="",
                n=1,
            )
            shown = list(diff)[:40]
            stale.append((name, "differs from protoc's output:\n" + "\n".join(shown)))
    return stale


def check() -> int:
    """Generate into a temporary directory and compare; 0 when fresh, 1 when stale."""
    with tempfile.TemporaryDirectory(prefix="gen_protos_") as tmp:
        generate(Path(tmp))
        stale = stale_files(Path(tmp))
    if not stale:
        print(f"generated code is up to date with {PROTO}")
        return 0
    for name, reason in stale:
        print(f"STALE: {name} {reason}", file=sys.stderr)
    print(
        f"\nThe generated code does not match {PROTO}. Regenerate it from the "
        f"repository root with:\n    {REGENERATE_COMMAND}\nand commit the result.",
        file=sys.stderr,
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write anything; exit 1 if the committed generated code is stale",
    )
    args = parser.parse_args(argv)
    try:
        check_grpcio_tools_version()
        if args.check:
            return check()
        generate(REPO_ROOT)
    except GenerationError as exc:
        print(f"gen_protos: {exc}", file=sys.stderr)
        return 2
    for name in GENERATED:
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
