"""Schedules declared in code (``worker.schedule(...)``), made true in the cluster when a worker starts.

A declaration is matched to a job by its name. ``reconcile`` looks for the
jobs of that exact name that are not deleted:

* one is found (several: the one this code created, else the oldest, and a
  warning) — if its spec differs from the declaration, once the cluster's
  defaults are filled in on both sides, it is updated (``UpdateJob``: the
  whole declared spec; a schedule change restarts it from now); if it is
  the same, nothing is sent. A paused job stays paused: someone paused it.
* none is found — the job is created with an idempotency key made of the
  name (and, when the name's last job was deleted, that job's id), so that
  two workers starting at once create it once: the second gets the first's
  job back, or, had it another declaration, ``AlreadyExists`` and then the
  first's job to update.

Starting a worker twice therefore never makes a second job, and a changed
declaration updates the job in place.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from raftsched.cluster.domain.errors import RaftschedError as _Root
from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.rpc import convert as cv
from raftsched.rpc.client.client import Client as RpcClient
from raftsched.sdk import from_pb
from raftsched.sdk.errors import AlreadyExists, translated
from raftsched.sdk.objects import Job

log = logging.getLogger("raftsched.worker")

#: the idempotency keys of declared schedules begin with this
KEY_PREFIX = "raftsched.schedule/"
_MAX_NAME_IN_KEY = 200


@dataclass(frozen=True)
class Declaration:
    """A schedule declared in code: its name and the spec it asks for."""

    name: str
    spec: pb.JobSpec


def schedule_key(name: str, after_job: str = "") -> str:
    """The idempotency key a declaration's job is created with (``after_job``: the deleted job it replaces)."""
    base = KEY_PREFIX + (name if len(name) <= _MAX_NAME_IN_KEY else "sha256:" + hashlib.sha256(name.encode()).hexdigest())
    return f"{base}/after/{after_job}" if after_job else base


def same_spec(a: pb.JobSpec, b: pb.JobSpec) -> bool:
    """Whether two specs mean the same job once the cluster's defaults are filled in."""
    try:
        return bool(cv.spec_from_pb(a) == cv.spec_from_pb(b))
    except (_Root, ValueError):  # one the cluster would refuse: let it say why
        return False


def reconcile(rpc: RpcClient, declarations: list[Declaration]) -> list[Job]:
    """Create or update each declaration's job (see the module); the jobs, in order."""
    with translated():
        return [_one(rpc, d) for d in declarations]


def _named(rpc: RpcClient, name: str) -> list[pb.Job]:
    jobs = [j for j in rpc.list_jobs(name_prefix=name) if j.spec.name == name]
    return sorted(jobs, key=lambda j: (j.created_at.seconds, j.created_at.nanos, j.job_id))


def _one(rpc: RpcClient, decl: Declaration) -> Job:
    named = _named(rpc, decl.name)
    live = [j for j in named if j.status != pb.JOB_STATUS_DELETED]
    if not live:
        deleted = [j for j in named if j.status == pb.JOB_STATUS_DELETED]
        key = schedule_key(decl.name, deleted[-1].job_id if deleted else "")
        try:
            with translated():
                created = rpc.create_job(decl.spec, key)
        except AlreadyExists:  # another worker created it first, from another declaration: update that job
            live = [j for j in _named(rpc, decl.name) if j.status != pb.JOB_STATUS_DELETED]
            if not live:
                raise
        else:
            log.info("schedule %r: created job %s", decl.name, created.job_id)
            return from_pb.job(created)
    ours = [j for j in live if j.idempotency_key.startswith(KEY_PREFIX)]
    job = (ours or live)[0]
    if len(live) > 1:
        others = ", ".join(j.job_id for j in live if j is not job)
        log.warning("schedule %r: several jobs have this name (%s too); keeping %s as declared", decl.name, others, job.job_id)
    if same_spec(job.spec, decl.spec):
        log.info("schedule %r: job %s is as declared", decl.name, job.job_id)
        return from_pb.job(job)
    updated = rpc.job("UpdateJob", pb.UpdateJobRequest(job_id=job.job_id, spec=decl.spec))
    log.info("schedule %r: job %s updated to the declaration", decl.name, job.job_id)
    return from_pb.job(updated)
