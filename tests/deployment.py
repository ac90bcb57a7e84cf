"""docs/deploy.md performed on test hosts (``tests.netns``): the same script, files, units and commands.

``Deployment`` plays each part of the guide:

- the trusted machine: ``scripts/deploy/cluster_files.sh`` (``make_files``,
  ``add_machine``) writes the PKI, secret, tokens, ``cluster.toml`` and one
  bundle per machine into ``root/trusted``;
- each machine: ``install(host)`` copies its bundle to its own
  ``/etc/raftsched`` (``root/hosts/<host>/etc/raftsched``), and
  ``start_node``/``start_executor`` run the ``ExecStart=`` of
  ``scripts/systemd/raftsched-node@.service`` and ``raftsched-executor@.service``
  (with their environment files) in the host's namespace, the paths of the
  unit rewritten to the host's directories;
- the operator's machine (the ``ops`` host): ``ops(...)`` runs a ``raftsched``
  client command there with the ``ops`` token and the CA, as the guide's
  ``export RAFTSCHED_...`` lines say; ``healthz`` asks a node's ``/healthz``
  (curl with the CA, as a probe would).

Data dirs and the ``[logs]`` dir are under ``root/var`` (one path for every
machine, as ``/var/lib/raftsched*`` is on real ones; node dirs are per id).
Processes are the test's own, stopped by pid (``stop_all``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.netns import Host, Network
from tests.systemd_units import UNIT_DIR, read_environment_file, read_unit

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "deploy" / "cluster_files.sh"
#: where the units expect the installed command and the configuration
UNIT_BINARY = "/opt/raftsched/bin/raftsched"
UNIT_ETC = "/etc/raftsched"


def raftsched_command() -> str:
    """The ``raftsched`` command of the Python running the tests (its venv's console script)."""
    beside = Path(sys.executable).parent / "raftsched"
    if beside.exists():
        return str(beside)
    found = shutil.which("raftsched")
    if found is None:
        raise RuntimeError("no raftsched command: install the project (scripts/bootstrap.sh)")
    return found


@dataclass
class Deployment:
    root: Path
    net: Network
    ops_host: Host
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: the gRPC addresses the operator's commands use ($RAFTSCHED_CLUSTER)
    cluster: list[str] = field(default_factory=list)

    @property
    def trusted(self) -> Path:
        return self.root / "trusted"

    def etc(self, host: str) -> Path:
        return self.root / "hosts" / host / "etc" / "raftsched"

    def _script_env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "RAFTSCHED": raftsched_command(),
            "DATA_DIR": str(self.root / "var" / "lib" / "raftsched"),
            "LOGS_DIR": str(self.root / "var" / "lib" / "raftsched-logs"),
            **extra,
        }

    def make_files(self, nodes: dict[str, str]) -> str:
        """``cluster_files.sh new`` for ``nodes`` (id -> address); returns what it printed."""
        argv = [str(SCRIPT), "new", str(self.trusted), *(f"{n}={a}" for n, a in nodes.items())]
        return _run(argv, self._script_env()).stdout

    def add_machine(self, node_id: str, address: str, join: list[str]) -> str:
        """``cluster_files.sh add`` (its node.env names the host's own /etc/raftsched); returns what it printed."""
        argv = [str(SCRIPT), "add", str(self.trusted), f"{node_id}={address}", ",".join(join)]
        return _run(argv, self._script_env(ETC_DIR=str(self.etc(node_id)))).stdout

    def install(self, host: str) -> None:
        """Copy the host's bundle to its /etc/raftsched (modes kept), as the guide's scp/install step."""
        self.etc(host).parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.trusted / "hosts" / host, self.etc(host))

    def write_members(self, hosts: list[str], nodes: dict[str, str]) -> None:
        """The guide's last replacement step: ``cluster_files.sh config`` with the current members, as
        cluster.toml in the trusted directory and on ``hosts``."""
        text = _run([str(SCRIPT), "config", *(f"{n}={a}" for n, a in nodes.items())], self._script_env()).stdout
        for path in [self.trusted / "cluster.toml", *(self.etc(h) / "cluster.toml" for h in hosts)]:
            path.write_text(text, encoding="utf-8")

    def _unit_argv(self, unit_name: str, instance: str, host: str, env: dict[str, str]) -> list[str]:
        argv = read_unit(UNIT_DIR / unit_name).exec_start(instance, hostname=host, env=env)
        assert argv[0] == UNIT_BINARY, f"{unit_name} runs {argv[0]}, not {UNIT_BINARY} (docs/deploy.md installs it there)"
        return [raftsched_command()] + [a.replace(UNIT_ETC, str(self.etc(host))) for a in argv[1:]]

    def _environment_file(self, path: Path) -> dict[str, str]:
        return read_environment_file(path) if path.exists() else {}

    def start_node(self, host: str) -> subprocess.Popen[bytes]:
        """``raftsched-node@<host>.service`` on that host (its node.env, if any, as EnvironmentFile=)."""
        env = self._environment_file(self.etc(host) / "node.env")
        argv = self._unit_argv("raftsched-node@.service", host, host, env)
        return self._start(host, argv, env, f"node-{host}")

    def start_executor(self, host: str, instance: str, args: str) -> subprocess.Popen[bytes]:
        """``raftsched-executor@<instance>.service`` on ``host``, its env file saying ``args``."""
        env_file = self.etc(host) / f"executor-{instance}.env"
        env_file.write_text(f"RAFTSCHED_EXECUTOR_ARGS={args}\n", encoding="utf-8")
        env = read_environment_file(env_file)
        argv = self._unit_argv("raftsched-executor@.service", instance, host, env)
        return self._start(host, argv, env, f"executor-{host}-{instance}")

    def _start(self, host: str, argv: list[str], env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
        with open(self.root / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                self.net.hosts[host].command(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def kill(self, name: str) -> None:
        """SIGKILL (through ``ip netns exec``, which execs: the pid is the program's)."""
        proc = self.procs[name]
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def terminate(self, name: str, timeout: float) -> int | None:
        """SIGTERM, as systemctl stop; the exit status, or None if it did not stop within ``timeout`` (then SIGKILL)."""
        proc = self.procs[name]
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(name)
            return None

    def stop_all(self) -> None:
        """Whatever still runs (a test that failed midway): SIGABRT first, so that a node's faulthandler
        writes every thread's Python stack to its log, then SIGKILL."""
        alive = {name: proc for name, proc in self.procs.items() if proc.poll() is None}
        for proc in alive.values():
            os.kill(proc.pid, signal.SIGABRT)
        for name, proc in alive.items():
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                self.kill(name)

    def ops_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "RAFTSCHED_CLUSTER": ",".join(self.cluster),
            "RAFTSCHED_CA_FILE": str(self.trusted / "pki" / "ca.crt"),
            "RAFTSCHED_TOKEN_FILE": str(self.trusted / "tokens" / "ops.token"),
            "PYTHONPATH": str(REPO),
        }

    def ops(self, *args: str, check: bool = True, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        """``raftsched ARGS`` on the operator's machine."""
        return _run(self.ops_host.command([raftsched_command(), *args]), self.ops_env(), check, timeout)

    def ops_python(self, *args: str, timeout: float = 90) -> str:
        """``python ARGS`` on the operator's machine (the test's own helpers); its output."""
        return _run(self.ops_host.command([sys.executable, *args]), self.ops_env(), True, timeout).stdout

    def https_get(self, address: str, path: str) -> tuple[int, str]:
        """GET https://ADDRESS/PATH from the operator's machine, checking the node against the CA: (status, body);
        status 0 when nothing answered."""
        argv = ["curl", "-sS", "--max-time", "5", "--cacert", str(self.trusted / "pki" / "ca.crt"), "-w", "\n%{http_code}"]
        done = _run(self.ops_host.command([*argv, f"https://{address}{path}"]), dict(os.environ), False, 20)
        body, _, code = done.stdout.rpartition("\n")
        return (int(code) if code.isdigit() else 0), body


def _run(argv: list[str], env: dict[str, str], check: bool = True, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done
