"""``Worker``: serve job types with Python functions, declare schedules in code, drain on SIGTERM.

::

    worker = Worker(queues=["default"], concurrency=8)

    @worker.task("report")
    def report(payload: ReportArgs, ctx: Context) -> dict: ...

    worker.schedule("nightly-report", cron="30 2 * * *", tz="Europe/Berlin", task="report")
    worker.run()

Underneath is the project's executor (``raftsched.cluster.executor``): the
leases, their renewals, fencing, batched completions and failover are its.
A worker adds the tasks (``raftsched.sdk.tasks``: typed payloads, results as
JSON, ``async def`` tasks on one event loop), the schedules
(``raftsched.sdk.schedules``: created or updated by name at start) and the
process's life: ``run()`` blocks until SIGTERM or SIGINT, then takes no new
runs, lets the running ones finish within ``grace`` seconds, cancels the
rest (their leases expire and another worker retries them) and returns.
``start()``/``stop()`` do the same without signals, for programs that run
a worker beside other things.

The cluster, TLS and token are found as the command line finds them
(``raftsched.sdk.connection``). Every run's log goes to an output store, as
with ``raftsched executor``: ``output=`` (any store), else the local store
under ``output_dir``, else the ``[logs]`` of ``config`` (a cluster.toml) or
the client config's ``output_dir`` (``local-cluster/client.toml`` has one).
With none of them the worker refuses to start and says what to give — it
never drops logs.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from raftsched.cluster.app.executor_main import build_output_store, check_output_store, logs_config
from raftsched.cluster.executor.bounded_log import LogSettings
from raftsched.cluster.executor.live_log import LiveSettings
from raftsched.cluster.executor.ports import OutputStore
from raftsched.cluster.executor.worker import OUTPUT_RETRY_S, Executor
from raftsched.cluster.node.config import LogsConfig
from raftsched.rpc.client.client import Client as RpcClient
from raftsched.rpc.client.lease_api import GrpcLeaseApi
from raftsched.sdk.connection import Connection, Target
from raftsched.sdk.errors import ConfigurationError, RaftschedError, translated
from raftsched.sdk.event_loop import LoopThread
from raftsched.sdk.objects import Job
from raftsched.sdk.schedules import Declaration, reconcile
from raftsched.sdk.spec import build_spec
from raftsched.sdk.tasks import TaskDef

log = logging.getLogger("raftsched.worker")

F = TypeVar("F", bound=Callable[..., Any])

NO_OUTPUT = (
    "cannot tell where run logs go, and a worker never drops them: the nodes accept a run's log only inside their "
    "own output directory ([logs] dir, default <data_dir>/outputs). Give output_dir='DIR' (that directory, on a "
    "disk the nodes read), config='cluster.toml' (its [logs]), or output= an output store; or run where "
    "local-cluster/client.toml (which names output_dir) is found. `raftsched worker` takes --output-dir, --config "
    "or --logs-store s3 --s3-bucket NAME"
)


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker runs; ``raftsched worker`` lays its flags over them (``Worker.configure``)."""

    queues: tuple[str, ...] = ("default",)
    concurrency: int = 8
    connection: Connection = field(default_factory=Connection)
    executor_id: str = ""
    output_dir: str = ""
    output: OutputStore | None = None
    #: seconds the running tasks get to finish once the worker is asked to stop
    grace: float = 30.0
    log_limit_mb: float = 64.0
    #: where logs are spooled while a run goes ("": $TMPDIR)
    log_spool_dir: str = ""
    live_interval: float = 1.0
    output_retry_s: float = OUTPUT_RETRY_S


class Worker:
    """Runs tasks for the cluster's runs (see the module)."""

    def __init__(
        self,
        queues: Sequence[str] | str = ("default",),
        concurrency: int = 8,
        *,
        cluster: str | Sequence[str] | None = None,
        config: str | None = None,
        token: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        insecure: bool = False,
        executor_id: str = "",
        output_dir: str = "",
        output: OutputStore | None = None,
        grace: float = 30.0,
    ) -> None:
        """A worker serving ``queues`` with ``concurrency`` tasks at once. The cluster, TLS and token as
        ``Client`` takes them; ``executor_id``: who it acts as (with a token, the token's name or ``name/...``;
        default ``host:pid``, with a token ``<its name>/host:pid``, the name as the cluster knows it); where run
        logs go: ``output`` (a store), ``output_dir``, else found from the config; ``grace``: seconds running
        tasks get to finish on SIGTERM."""
        self.settings = WorkerSettings(
            queues=_queues(queues),
            concurrency=concurrency,
            connection=Connection(cluster, config, token, token_file, ca_file, cert_file, key_file, insecure),
            executor_id=executor_id,
            output_dir=output_dir,
            output=output,
            grace=grace,
        )
        self._tasks: dict[str, TaskDef] = {}
        self._schedules: dict[str, Declaration] = {}
        self._lock = threading.Lock()
        self._stop_asked = threading.Event()
        self._executor: Executor | None = None
        self._rpc: RpcClient | None = None
        self._loop: LoopThread | None = None
        self._stopped = False
        #: the jobs of the declared schedules, once ``start`` has made them so
        self.scheduled_jobs: list[Job] = []

    # ---------------------------------------------------------------- declaring

    def task(self, name: str | Callable[..., Any] | None = None) -> Any:
        """Register a function as the task for job type ``name`` (default: the function's name):
        ``@worker.task("report")``. It takes ``(payload, ctx)``, ``(payload)`` or nothing; the payload is
        decoded into its annotation; ``async def`` functions run on the worker's event loop."""
        if callable(name):
            return self.task(name.__name__)(name)

        def register(fn: F) -> F:
            self.register(name or fn.__name__, fn)
            return fn

        return register

    def register(self, name: str, fn: Callable[..., Any]) -> None:
        """Register ``fn`` as the task for job type ``name`` (what ``@worker.task(name)`` does)."""
        with self._lock:
            if name in self._tasks:
                raise ValueError(f"task {name!r} is already registered (by {self._tasks[name].fn.__qualname__})")
            self._tasks[name] = TaskDef(name, fn)

    @property
    def tasks(self) -> list[str]:
        """The job types this worker serves."""
        return sorted(self._tasks)

    def schedule(self, name: str, *, task: str, queue: str | None = None, payload: Any = None, **spec: Any) -> None:
        """Declare a job that runs ``task`` on a schedule: ``cron=`` (with ``tz=``), ``every=``, ``at=`` or
        ``after=``, and any of ``create_job``'s arguments (``payload``, ``max_attempts``, ``timeout``...).
        ``queue`` defaults to the worker's first (as it is when the worker starts: ``raftsched worker --queue``
        counts). When the worker starts, the job named ``name`` is created, or updated if it differs from this
        declaration: one job per name, however many workers start."""
        if name in self._schedules:
            raise ValueError(f"schedule {name!r} is declared twice")
        decl = Declaration(name, build_spec(name, type=task, queue=queue or "", payload=payload, **spec))
        self._schedules[name] = decl

    def _declarations(self) -> list[Declaration]:
        """The declared schedules, those without a queue on the worker's first."""
        out = []
        for decl in self._schedules.values():
            if not decl.spec.queue:
                spec = type(decl.spec)()
                spec.CopyFrom(decl.spec)
                spec.queue = self.settings.queues[0]
                decl = Declaration(decl.name, spec)
            out.append(decl)
        return out

    def configure(self, **changes: Any) -> None:
        """Replace settings before the worker starts: ``queues``, ``concurrency``, ``executor_id``,
        ``output_dir``, ``output``, ``grace``, ``log_limit_mb``, ``log_spool_dir``, ``live_interval``,
        ``output_retry_s``, and the
        connection's (``cluster``, ``config``, ``token``, ``token_file``, ``ca_file``, ``cert_file``,
        ``key_file``, ``insecure``). ``None`` leaves a setting as it is."""
        names = {f.name for f in dataclasses.fields(Connection)}
        conn = {k: changes.pop(k) for k in list(changes) if k in names}
        given = {k: v for k, v in changes.items() if v is not None}
        unknown = sorted(set(given) - {f.name for f in dataclasses.fields(WorkerSettings)})
        if unknown:
            raise TypeError(f"unknown worker setting(s): {', '.join(unknown)}")
        if "queues" in given:
            given["queues"] = _queues(given["queues"])
        self.settings = dataclasses.replace(self.settings, connection=self.settings.connection.overridden(**conn), **given)

    # ---------------------------------------------------------------- running

    def run(self) -> None:
        """Start, serve until SIGTERM or SIGINT (or ``stop()`` from another thread), then drain: no new runs,
        running tasks get ``grace`` seconds to finish, the rest are cancelled. ``ConfigurationError`` when the
        cluster or the output store cannot be used."""
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        restore = self._catch_signals()
        try:
            self.start()
            while not self._stop_asked.wait(0.2):  # sliced: the main thread must run to see a signal
                pass
            log.info("stopping: no new runs; up to %g s for the running ones", self.settings.grace)
        finally:
            self.stop()
            restore()

    def start(self) -> None:
        """Connect, check the output store, create or update the declared schedules and begin taking runs;
        returns at once (``stop()`` ends it)."""
        s = self.settings
        if self._executor is not None or self._stopped:
            raise RuntimeError("this worker was started already: make a new Worker to start again")
        if not self._tasks:
            raise ConfigurationError("this worker has no tasks: register one with @worker.task('type')")
        if s.concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, got {s.concurrency}")
        target = s.connection.resolve()
        store = s.output or self._output_store(target)
        with translated():
            check_output_store(store, s.output_retry_s, log)
        self._rpc = RpcClient(target.addresses, deadline_s=30, prefer_leader=True, security=target.security)
        self._rpc.source = target.source
        try:
            executor_id = s.executor_id or self._default_executor_id(bool(target.security.token))
            self._serve(executor_id, store)
        except BaseException:
            self.stop(0)  # nothing half started is left behind
            raise

    def _default_executor_id(self, with_token: bool) -> str:
        """``host:pid``; with a token, ``<the token's name>/host:pid`` (the cluster says whose token it is: an
        executor token acts as its name and ``name/...``, an admin token as anyone)."""
        here = f"{socket.gethostname()}:{os.getpid()}"
        if not with_token:
            return here
        assert self._rpc is not None
        try:
            with translated():
                me = self._rpc.who_am_i()
        except RaftschedError as exc:
            if exc.code != "UNIMPLEMENTED":
                raise
            raise ConfigurationError(
                "with a token, give executor_id=: the token's name, or name/<suffix> for several workers (the cluster "
                "is of a version that cannot say whose token this is)"
            ) from None
        if not me.tokens_required:
            return here
        if not {"executor", "admin"} & set(me.roles):
            raise ConfigurationError(
                f"token {me.name!r} (roles: {', '.join(me.roles) or 'none'}) cannot serve runs: a worker needs a token "
                "with the executor role"
            )
        return f"{me.name}/{here}"

    def _serve(self, executor_id: str, store: OutputStore) -> None:
        """Make the declared schedules so, then start the event loop (for async tasks) and the executor."""
        s = self.settings
        assert self._rpc is not None
        self.scheduled_jobs = reconcile(self._rpc, self._declarations())
        if any(t.is_async for t in self._tasks.values()):
            self._loop = LoopThread()
            self._loop.start()
        self._executor = Executor(
            GrpcLeaseApi(self._rpc, executor_id),
            list(s.queues),
            s.concurrency,
            {name: t.handler(self._loop) for name, t in self._tasks.items()},
            store,
            log_settings=_log_settings(s.log_limit_mb, s.log_spool_dir),
            output_retry_s=s.output_retry_s,
            live=LiveSettings(interval_s=s.live_interval, max_backoff_s=max(30.0, s.live_interval)),
        )
        with translated():
            self._executor.start()
        log.info(
            "worker %s serving queues %s, tasks %s, %d at a time; output in %s",
            executor_id,
            ",".join(s.queues),
            ",".join(self.tasks),
            s.concurrency,
            store.describe(),
        )

    def stop(self, grace: float | None = None) -> None:
        """Stop taking runs, give the running ones ``grace`` seconds (default: the worker's) to finish, cancel
        the rest, and close the connections. Safe to call twice, and from any thread."""
        self._stop_asked.set()
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._executor is not None:
            self._executor.stop(self.settings.grace if grace is None else grace)
            log.info("stopped: %d runs completed, %d leases lost", self._executor.completed, self._executor.lost)
        if self._loop is not None:
            self._loop.stop()
        if self._rpc is not None:
            self._rpc.close()

    def _output_store(self, target: Target) -> OutputStore:
        cfg = target.cluster_config
        with translated():
            logs = logs_config(argparse.Namespace(), cfg.logs if cfg is not None else LogsConfig())
            output_dir = self.settings.output_dir or target.output_dir
            if logs.store == "local" and not output_dir:
                raise ConfigurationError(NO_OUTPUT)
            return build_output_store(logs, output_dir)

    def _catch_signals(self) -> Callable[[], None]:
        """SIGTERM and SIGINT ask the worker to stop (in the main thread only); what restores the old handlers."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        old = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in old:
            signal.signal(sig, lambda _signum, _frame: self._stop_asked.set())

        def restore() -> None:
            for sig, handler in old.items():
                signal.signal(sig, handler)

        return restore


def _queues(queues: Sequence[str] | str) -> tuple[str, ...]:
    names = (queues,) if isinstance(queues, str) else tuple(queues)
    if not names or not all(isinstance(q, str) and q for q in names):
        raise ValueError(f"queues={queues!r}: give one or more queue names")
    return names


def _log_settings(limit_mb: float, spool_dir: str) -> LogSettings:
    try:
        return LogSettings(int(limit_mb * 1024 * 1024), spool_dir)
    except ValueError as exc:
        raise ConfigurationError(f"log_limit_mb: {exc}") from None
