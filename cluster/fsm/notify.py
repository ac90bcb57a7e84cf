"""Notifications (command format 5): a run's transition that a job's ``notify`` rule names becomes a run of the
built-in type ``notify``, in the same Raft entry as the transition.

Events: ``FAILED``, ``DEAD_LETTER``, ``EXPIRED``, ``SUCCEEDED``, ``SKIPPED``
(a skip record), and ``RECOVERED`` — a success after failures in a row.
For each rule that names the event, one PENDING run of the job on the queue
``raftsched.notify`` (``NOTIFY_QUEUE``) with ``Run.extra`` type ``notify``
and a payload ``raftsched.cluster.domain.notifications`` writes: the URL,
the secret's name (never the secret: it stays in the executor's file), the
event id and the JSON body, all from the state, so that every replica makes
the same bytes. Its id names the run, attempt, event and rule: a command
applied twice (a retried proposal is one entry; a replayed log is the same
entries) never makes a second one, and SIGKILL of any node loses none, as
the transition and its notification commit together. It is leased, retried
with backoff and dead-lettered like any run of the job (its attempts and
backoff), and its own end is neither counted in the job's summary nor
notified. Both runs' explanations name each other.
"""

from __future__ import annotations

from raftsched.cluster.domain.model import NOTIFY_QUEUE, NOTIFY_TYPE, JobSpec, Run, RunExtra, run_extra
from raftsched.cluster.domain.notifications import notification_payload, notification_run_id
from raftsched.cluster.fsm import runs
from raftsched.cluster.fsm.tx import Tx


def is_notification(run: Run) -> bool:
    return bool(run.extra) and run_extra(run, RunExtra.TYPE) == NOTIFY_TYPE


def transition(tx: Tx, run: Run, spec: JobSpec, status: str, failures_before: int) -> None:
    """``run`` just ended in ``status`` (or was recorded SKIPPED): make the notifications its job's rules ask for."""
    if is_notification(run):
        return
    events = [status]
    if status == "SUCCEEDED" and failures_before > 0:
        events.append("RECOVERED")
    job = tx.job(run.job_id)
    if job is None:
        return
    for i, rule in enumerate(spec.notify):
        for event in events:
            if event not in rule.events:
                continue
            nid = notification_run_id(run, event, i)
            if tx.run(nid) is not None:
                continue
            payload = notification_payload(job.job_id, spec, run, event, rule, nid)
            extra = tuple(sorted({RunExtra.TYPE: NOTIFY_TYPE, RunExtra.PAYLOAD: payload, RunExtra.EVENT: event}.items()))
            note = runs.new_run(tx, job, nid, tx.mem.now_ms, queue=NOTIFY_QUEUE, extra=extra)
            runs.step(tx, note, "notification", f"notification of {event} of run {run.run_id} to {rule.url}")
            runs.step(tx, run, "notified", f"{event}: notification {nid} to {rule.url}")
