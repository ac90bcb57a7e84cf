"""``raftsched executor``: run an executor process until SIGTERM (graceful) or SIGKILL."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import socket
import threading

from cluster.config import ConfigError, load_config
from cluster.executor import Executor
from storage.output import LocalOutputStore


def _load_handler(spec: str) -> tuple[str, object]:
    job_type, sep, target = spec.partition("=")
    module, colon, attr = target.partition(":")
    if not sep or not colon or not job_type:
        raise ConfigError(f"--handler {spec!r}: use TYPE=module:function, e.g. report=myjobs:make_report")
    try:
        return job_type, getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--handler {spec!r}: cannot load {target}: {exc}") from exc


def run_executor(args: argparse.Namespace) -> int:
    from rpc.client import Client
    from rpc.executor_client import GrpcLeaseApi

    executor_id = args.executor_id or f"{socket.gethostname()}:{os.getpid()}"
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s executor {executor_id} %(levelname)s %(message)s")
    log = logging.getLogger("raftsched.executor")
    try:
        if args.cluster:
            addresses = [a.strip() for a in args.cluster.split(",") if a.strip()]
            output_dir = args.output_dir or os.path.abspath("raftsched-output")
        elif args.config:
            cfg = load_config(args.config)
            addresses = cfg.grpc_addresses()
            output_dir = args.output_dir or os.path.join(cfg.data_dir, "outputs")
        else:
            raise ConfigError("give --config cluster.toml or --cluster host:port,...")
        handlers = dict(_load_handler(h) for h in args.handler)
        if args.concurrency < 1:
            raise ConfigError("--concurrency must be at least 1")
    except ConfigError as exc:
        log.error("cannot start executor: %s", exc)
        return 2
    client = Client(addresses, deadline_s=30)
    executor = Executor(
        GrpcLeaseApi(client, executor_id),
        args.queue or ["default"],
        args.concurrency,
        handlers,  # type: ignore[arg-type]
        LocalOutputStore(output_dir),
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    executor.start()
    log.info("serving queues %s with %d workers; output in %s", ",".join(executor.queues), args.concurrency, output_dir)
    stop.wait()
    log.info("stopping: no new runs; up to %.0f s for running ones", args.grace)
    executor.stop(args.grace)
    client.close()
    log.info("stopped: %d runs completed, %d leases lost", executor.completed, executor.lost)
    return 0
