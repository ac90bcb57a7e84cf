"""The ``notify`` job type: deliver one notification (``raftsched.cluster.fsm.notify`` makes them).

Its payload (``raftsched.cluster.domain.notifications``) names the URL, the
secret's name, the event id and the body. It is POSTed as the ``http`` type
would (``HttpHandler.send``: the same address guard, deadline and redirect
rules) with ``Content-Type: application/json``, ``Raftsched-Event-Id`` (the
same on every retry: receivers drop duplicates by it) and, with a secret,
``Raftsched-Signature: sha256=<hex HMAC-SHA256 of the body>``. Secrets come
from the executor's ``--notify-secrets`` file (TOML ``name = "value"``),
never from the Raft log; a notification naming a secret the file does not
hold fails with that said (and is retried, then dead-lettered, like any run).
"""

from __future__ import annotations

import json
import tomllib
from typing import Mapping

from raftsched.cluster.domain.notifications import EVENT_HEADER, SIGNATURE_HEADER, signature
from raftsched.cluster.domain.payloads import HttpPayload
from raftsched.cluster.executor.http_guard import AddressPolicy
from raftsched.cluster.executor.http_handler import HttpHandler
from raftsched.cluster.executor.ports import HandlerError, Task, TaskContext


def load_secrets(path: str) -> dict[str, str]:
    """The secrets of a ``--notify-secrets`` file: TOML ``name = "value"`` lines. ValueError naming what is wrong."""
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except OSError as exc:
        raise ValueError(f"--notify-secrets {path}: cannot read it: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"--notify-secrets {path}: not TOML: {exc}") from exc
    bad = [k for k, v in table.items() if not isinstance(v, str) or not v]
    if bad:
        raise ValueError(f'--notify-secrets {path}: {bad[0]!r} is not a non-empty string: write name = "value"')
    return dict(table)


class NotifyHandler:
    """Delivers ``notify`` runs under the executor's address policy, signing with its secrets."""

    def __init__(self, policy: AddressPolicy = AddressPolicy(), secrets: Mapping[str, str] | None = None) -> None:
        self._http = HttpHandler(policy)
        self._secrets = dict(secrets or {})

    def __call__(self, task: Task, ctx: TaskContext) -> bytes:
        try:
            note = json.loads(task.payload.decode("utf-8"))
            url, event_id, body = str(note["url"]), str(note["event_id"]), str(note["body"])
            secret_name = str(note.get("secret_name", ""))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise HandlerError(f"not a notification payload: {exc!r}") from exc
        headers = {"Content-Type": "application/json", EVENT_HEADER: event_id}
        data = body.encode("utf-8")
        if secret_name:
            secret = self._secrets.get(secret_name)
            if secret is None:
                raise HandlerError(
                    f"the notification is to be signed with secret {secret_name!r}, which this executor's "
                    "--notify-secrets file does not hold"
                )
            headers[SIGNATURE_HEADER] = signature(secret, data)
        ctx.log.write(f"notification {event_id} -> POST {url}\n".encode())
        return self._http.send(HttpPayload(url, "POST", headers, body), task, ctx)
