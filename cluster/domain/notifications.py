"""What a notification carries, and how an executor signs it: pure, the same bytes on every node.

* ``notification_run_id(run, event, rule)``: ``<run id>#notify-<attempt>-<event>-<rule>``.
* ``notification_payload(...)``: the ``notify`` run's payload, UTF-8 JSON
  ``{"url", "secret_name", "event_id", "body"}`` where ``body`` is the
  request body as text: ``{"event", "job_id", "job_name", "run_id",
  "status", "attempt", "error", "scheduled_time", "labels"}`` (keys sorted,
  no spaces), sent as it is on every retry.
* ``signature(secret, body)``: ``sha256=<hex HMAC-SHA256 of the body>``, the
  ``Raftsched-Signature`` header; ``EVENT_HEADER`` carries the event id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime, timezone

from raftsched.cluster.domain.model import JobSpec, NotifyRule, Run

EVENT_HEADER = "Raftsched-Event-Id"
SIGNATURE_HEADER = "Raftsched-Signature"


def notification_run_id(run: Run, event: str, rule: int) -> str:
    return f"{run.run_id}#notify-{run.attempt}-{event.lower()}-{rule}"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def notification_body(job_id: str, spec: JobSpec, run: Run, event: str) -> str:
    body = {
        "event": event,
        "job_id": job_id,
        "job_name": spec.name,
        "run_id": run.run_id,
        "status": run.status.value,
        "attempt": run.attempt,
        "error": run.error,
        "scheduled_time": _iso(run.scheduled_ms),
        "labels": dict(spec.labels),
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def notification_payload(job_id: str, spec: JobSpec, run: Run, event: str, rule: NotifyRule, event_id: str) -> bytes:
    payload = {
        "url": rule.url,
        "secret_name": rule.secret_name,
        "event_id": event_id,
        "body": notification_body(job_id, spec, run, event),
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
