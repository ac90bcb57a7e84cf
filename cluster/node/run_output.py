"""GetRunOutput in domain terms: a run's stored log and result, or why they are missing.

Logs never travel through Raft: an executor stores each attempt's output and
puts its URI into the completion. This reads it back through the node's
``OutputReader`` port. An output that cannot be read is a ``missing_reason``
for the caller, never an error of the call.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.domain.model import Run
from cluster.domain.output import MISSING_OUTPUT_MARK, OutputMissing
from cluster.node.ports import OutputReader


@dataclass(frozen=True, slots=True)
class RunOutput:
    run_id: str
    attempt: int
    log: bytes
    result: bytes
    log_uri: str
    missing_reason: str


def read_run_output(run: Run, attempt: int, reader: OutputReader) -> RunOutput:
    """Attempt ``attempt`` (0: the latest) of ``run``: its log and result, or the reason they are missing."""
    wanted = attempt or run.attempt
    missing, log, result = "", b"", run.result
    if attempt and attempt != run.attempt:
        missing = f"only the latest attempt ({run.attempt}) of run {run.run_id} is recorded"
    elif not run.log_uri:
        mark = run.error.find(MISSING_OUTPUT_MARK)
        missing = run.error[mark:] if mark >= 0 else ""
        missing = missing or f"output missing: no log is stored for run {run.run_id} (status {run.status.value})"
    else:
        try:
            log, stored = reader.read(run.log_uri)
            result = stored or run.result
        except OutputMissing as exc:
            missing = f"output missing: {exc}"
    return RunOutput(run.run_id, wanted, log, result, run.log_uri, missing)
