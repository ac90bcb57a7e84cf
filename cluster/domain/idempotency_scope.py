"""Idempotency keys belong to a queue: the key a CreateJob stores is its queue's, not the cluster's.

A submitter limited to queue ``a`` must not be able to take a key that queue
``b``'s team uses (its CreateJob would answer ALREADY_EXISTS, or their job).
So the proposer stores a request's key under its spec's queue: ``scoped(queue,
key)`` is ``<queue>`` + U+001F (UNIT SEPARATOR) + ``<key>``. A key a request
may carry holds no control character (``raftsched.cluster.domain.unsafe_text``) and a
queue name only letters, digits and ``_ . : / -``, so no key a client sends
equals a scoped one, and two (queue, key) pairs never share one.

The state machine is not changed by this: it stores and compares the string
the command carries, as it always did. Entries in the log from before keep
their plain keys and replay exactly as before; a node of any version applies
a scoped key as it would any key, so a cluster in a rolling upgrade stays in
agreement. What the proposer adds (``raftsched.cluster.node.job_service``): a plain key
stored before (a *legacy* key) whose job is in the request's queue is still
sent as it is, so a create retried across the upgrade finds its job; one whose
job is in another queue is ignored (a new job, under the scoped key).

``user_key(stored)`` is what the API shows as ``Job.idempotency_key``: the
key as the client sent it, for scoped and legacy keys alike.

Pure: no I/O.
"""

from __future__ import annotations

#: between the queue and the key of a scoped key (a control character: never in a key a client sends)
SEPARATOR = "\x1f"


def scoped(queue: str, key: str) -> str:
    """The stored form of ``key`` sent with a spec of ``queue`` ("" stays "": no key)."""
    return f"{queue}{SEPARATOR}{key}" if key else ""


def user_key(stored: str) -> str:
    """The key as its client sent it: a scoped key without its queue; a legacy key as it is."""
    queue, sep, key = stored.partition(SEPARATOR)
    return key if sep else stored


def readable(message: str, stored: str) -> str:
    """A state-machine message that quotes ``stored`` (``repr``), quoting the client's key and its queue instead."""
    queue, sep, key = stored.partition(SEPARATOR)
    return message.replace(repr(stored), f"{key!r} (queue {queue!r})") if sep else message
