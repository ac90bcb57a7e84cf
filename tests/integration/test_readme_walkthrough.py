"""The README's first steps, run as they stand: the set-up command, then every line of the
```` ```sh walkthrough ```` block, in one shell, as a new user types them — including the SIGKILL of
whichever node leads. Each step's output is checked; a README line without a check here (or a
check whose line is gone) fails the test, so the README and the tools cannot drift apart.

Isolation: the lines run in a temp directory holding links to this checkout's ``scripts`` and
the venv running the tests (``.venv``), so ``scripts/launch_cluster.sh`` keeps its cluster in
that directory's ``local-cluster/``; the set-up command gets ``--free-ports``, so the one address
the README spells out, node 1's HTTP endpoint ``127.0.0.1:8081``, is replaced in the lines run by
the one that cluster got.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

import pytest

from raftsched.cluster.app.local_cluster import LocalCluster

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(REPO, "README.md")
#: node 1's HTTP endpoint as the README spells it (scripts/launch_cluster.sh's port without --free-ports)
README_HTTP = "127.0.0.1:8081"


def fenced_block(text: str, info: str) -> str:
    """The body of the first fenced block whose info string is exactly ``info``."""
    m = re.search(rf"^```{re.escape(info)}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert m, f"README.md has no ```{info} block"
    return m.group(1)


def commands(block: str) -> list[str]:
    """The shell commands of a block: continuation lines joined, comments and blank lines left out."""
    out: list[str] = []
    pending = ""
    for raw in block.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((pending + line).strip())
        pending = ""
    return out


def setup_command(text: str) -> str:
    section = text[text.index("## Two commands on a fresh machine") :]
    cmd = commands(fenced_block(section, "sh"))[0]
    assert cmd == "scripts/launch_cluster.sh", f"the README's set-up command changed: {cmd!r}"
    return cmd


@dataclass
class Step:
    command: str
    output: str
    rc: int
    env: dict[str, str]


def run_script(cwd: str, lines: list[str], env: dict[str, str], timeout: float) -> list[Step]:
    """Run ``lines`` in one bash, each framed by markers; per line its output (stdout and stderr),
    exit status and the variables the lines assign."""
    names = sorted({m.group(1) for line in lines for m in [re.match(r"([A-Z_]+)=", line)] if m})
    script = []
    for i, line in enumerate(lines):
        script.append(f"echo '@@begin {i}'")
        script.append(line)
        script.append(f'echo "@@end {i} $?"' + "".join(f' "{n}=${n}"' for n in names))
    proc = subprocess.run(
        ["bash", "-c", "\n".join(script) + "\n"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    steps, text = [], proc.stdout
    for i, line in enumerate(lines):
        m = re.search(rf"^@@begin {i}\n(.*?)^@@end {i} (\d+)(.*)$", text, re.MULTILINE | re.DOTALL)
        assert m, f"step {i} ({line!r}) did not run to its end; the whole output:\n{text}"
        variables = dict(re.findall(r"\b([A-Z_]+)=(\S*)", m.group(3)))
        steps.append(Step(line, m.group(1), int(m.group(2)), variables))
    return steps


def _status_rows(output: str) -> dict[str, tuple[str, str]]:
    """NODE -> (ROLE, REACHABLE) from `raftsched cluster status`."""
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) >= 5 and re.fullmatch(r"n\d+", cells[0]):
            rows[cells[0]] = (cells[1], cells[4])
    return rows


def _leader_line(output: str) -> str:
    m = re.search(r"^leader: (\S+)", output, re.MULTILINE)
    assert m, output
    return m.group(1)


def _tick_instants(output: str, job_id: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(rf"^{re.escape(job_id)}@(\d+)\s", output, re.MULTILINE)]


def check_status_first(s: Step, seen: dict[str, str]) -> None:
    rows = _status_rows(s.output)
    assert len(rows) == 3 and all(r[1] == "yes" for r in rows.values()), s.output
    assert rows[_leader_line(s.output)][0] == "LEADER"
    assert "jobs: 1" in s.output  # the sample job


def check_healthz(s: Step, seen: dict[str, str]) -> None:
    assert re.fullmatch(r"ok: leader n[123], term \d+, quorum reached\n?", s.output), s.output


def check_metrics(s: Step, seen: dict[str, str]) -> None:
    assert re.search(r'^raftsched_runs\{status="PENDING"\} \d', s.output, re.MULTILINE), s.output
    assert "raftsched_runs_finished_total" in s.output


def check_web_view(s: Step, seen: dict[str, str]) -> None:
    assert s.output.strip() == "<title>Cluster · raftsched n1</title>", s.output


def check_preview(s: Step, seen: dict[str, str]) -> None:
    lines = s.output.strip().splitlines()
    assert len(lines) == 4, s.output
    assert lines[0].startswith("Fri 2026-10-23 02:30:00 CEST (UTC+02:00)  2026-10-23T00:30:00Z"), s.output
    assert "repeated hour" in lines[2] and lines[3].startswith("Mon 2026-10-26 02:30:00 CET (UTC+01:00)"), s.output


def check_create_nightly(s: Step, seen: dict[str, str]) -> None:
    assert "nightly-report" in s.output and "ACTIVE" in s.output
    assert "cron '30 2 * * *' Europe/Berlin" in s.output


def check_tick_created(s: Step, seen: dict[str, str]) -> None:
    assert re.fullmatch(r"j-[0-9a-f]+", s.env.get("TICK", "")), s.env
    seen["TICK"] = s.env["TICK"]


def _watched(s: Step, seen: dict[str, str]) -> tuple[list[str], set[str]]:
    """(the kinds of the tick job's changes shown, the runs seen finished) of a `run watch` step."""
    rows = [line.split() for line in s.output.splitlines() if seen["TICK"] + "@" in line]
    return [cells[1] for cells in rows], {cells[2] for cells in rows if cells[1] == "finished"}


def check_watch(s: Step, seen: dict[str, str]) -> None:
    assert "FIRED = when the fire committed" in s.output  # the header says what the columns mean
    events, finished = _watched(s, seen)
    assert len(finished) == 6 and events[-1] == "finished", s.output  # --count 6: six runs, seen through to their end
    assert events[0] in ("fired", "leased", "finished") and "fired" in events and "leased" in events, events


def check_logs(s: Step, seen: dict[str, str]) -> None:
    assert re.search(r"\b20\d\d\b", s.output), s.output  # `date` printed the year


def check_leader_saved(s: Step, seen: dict[str, str]) -> None:
    assert re.fullmatch(r"n[123]", s.env.get("LEADER", "")), s.env
    seen["LEADER"] = s.env["LEADER"]


def check_kill(s: Step, seen: dict[str, str]) -> None:
    assert s.output.strip() == "", s.output


def check_new_leader(s: Step, seen: dict[str, str]) -> None:
    new = s.output.strip()
    assert re.fullmatch(r"n[123]", new) and new != seen["LEADER"], (new, seen)
    seen["NEW_LEADER"] = new


def check_status_after_kill(s: Step, seen: dict[str, str]) -> None:
    rows = _status_rows(s.output)
    assert rows[seen["LEADER"]][1] == "no", s.output
    assert _leader_line(s.output) == seen["NEW_LEADER"], s.output


def check_watch_after_kill(s: Step, seen: dict[str, str]) -> None:
    events, finished = _watched(s, seen)
    assert len(finished) == 3 and "fired" in events, s.output  # the new leader fires, the runs end


def check_runs_after_kill(s: Step, seen: dict[str, str]) -> None:
    instants = _tick_instants(s.output, seen["TICK"])
    assert len(instants) >= 4, s.output  # ~2 before the watch, 3 while it ran, more across the kill
    assert len(set(instants)) == len(instants), "an instant fired twice"
    gaps = {b - a for a, b in zip(instants, instants[1:])}
    assert gaps == {2000}, f"instants not every 2 s: {sorted(gaps)}\n{s.output}"


def check_start_node(s: Step, seen: dict[str, str]) -> None:
    assert f"{seen['LEADER']} rejoined" in s.output and "every running node reaches it" in s.output, s.output


def check_status_all_back(s: Step, seen: dict[str, str]) -> None:
    rows = _status_rows(s.output)
    assert len(rows) == 3 and all(r[1] == "yes" for r in rows.values()), s.output


def check_stop(s: Step, seen: dict[str, str]) -> None:
    assert "executor-1 stopped" in s.output and "stopped. Its data stays" in s.output, s.output


#: (the README line, as a regular expression; its check), in README order
EXPECTED: list[tuple[str, Callable[[Step, dict[str, str]], None]]] = [
    (r"\. \.venv/bin/activate", lambda s, _: None),
    (r"raftsched cluster status", check_status_first),
    (r"curl -s 127\.0\.0\.1:8081/healthz", check_healthz),
    (r"curl -s 127\.0\.0\.1:8081/metrics \| grep raftsched_runs", check_metrics),
    (
        r'curl -s -H "Authorization: Bearer \$\(cat local-cluster/secure/viewer\.token\)" 127\.0\.0\.1:8081/ '
        r"\| grep -o '<title>\.\*</title>'",
        check_web_view,
    ),
    (r"raftsched job preview --cron '30 2 \* \* \*' --tz Europe/Berlin --from 2026-10-23 --count 4", check_preview),
    (r"raftsched job create --name nightly-report .*", check_create_nightly),
    (r"TICK=\$\(raftsched job create --name tick --every 2s .* -o id\)", check_tick_created),
    (r"raftsched run watch --job \$TICK --count 6", check_watch),
    (r"raftsched run logs \$\(raftsched run list --job \$TICK --status succeeded -o id \| tail -1\)", check_logs),
    (r"LEADER=\$\(raftsched cluster leader\)", check_leader_saved),
    (r"kill -9 \$\(scripts/launch_cluster.sh --pid \$LEADER\)", check_kill),
    (r"raftsched cluster leader --wait 15s", check_new_leader),
    (r"raftsched cluster status", check_status_after_kill),
    (r"raftsched run watch --job \$TICK --count 3", check_watch_after_kill),
    (r"raftsched run list --job \$TICK", check_runs_after_kill),
    (r"scripts/launch_cluster.sh --start-node \$LEADER", check_start_node),
    (r"raftsched cluster status", check_status_all_back),
    (r"scripts/launch_cluster.sh --stop", check_stop),
]


def _stop_leftovers(root: str) -> None:
    """Whatever the walkthrough left running (a failed step), by the pids the launch script recorded."""
    try:
        with open(os.path.join(root, "pids.json"), encoding="utf-8") as f:
            pids = json.load(f)
    except FileNotFoundError:
        return
    for pid in pids.values():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if root.encode() not in f.read():
                    continue  # not ours (the pid was reused)
            os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def test_the_readme_walkthrough_runs_as_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    if not os.path.exists(os.path.join(sys.prefix, "bin", "activate")):
        why = "the tests do not run in a virtual environment: the walkthrough's `. .venv/bin/activate` needs one"
        if os.environ.get("CI") == "true":  # CI runs scripts/test.sh, which always uses .venv
            pytest.fail(why)
        pytest.skip(why)
    text = open(README, encoding="utf-8").read()
    lines = commands(fenced_block(text, "sh walkthrough"))
    assert len(lines) == len(EXPECTED), "the walkthrough and this test list different steps:\n" + "\n".join(lines)
    for line, (pattern, _) in zip(lines, EXPECTED):
        assert re.fullmatch(pattern + r"(\s+#.*)?", line), f"README line {line!r} is not the step this test checks ({pattern!r})"
    os.symlink(os.path.join(REPO, "scripts"), tmp_path / "scripts")
    os.symlink(sys.prefix, tmp_path / ".venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")}
    env |= {"RAFTSCHED_VENV": sys.prefix, "TZ": "UTC", "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    env["PATH"] = "/usr/bin:/bin"  # `raftsched` only from the activated venv
    root = str(tmp_path / "local-cluster")
    try:
        setup = subprocess.run(
            f"{setup_command(text)} --free-ports", shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
        )
        assert setup.returncode == 0, setup.stdout + setup.stderr
        assert "runs in the background" in setup.stdout and "client config: local-cluster/client.toml" in setup.stdout
        http = LocalCluster.open(root).nodes["n1"].http  # what the README calls 127.0.0.1:8081
        steps = run_script(str(tmp_path), [line.replace(README_HTTP, http) for line in lines], env, timeout=240)
        seen: dict[str, str] = {}
        for step, (_, check) in zip(steps, EXPECTED):
            assert step.rc == 0, f"{step.command!r} exited {step.rc}:\n{step.output}"
            check(step, seen)
        assert not os.path.exists(os.path.join(root, "pids.json")), "--stop left processes recorded"
    finally:
        _stop_leftovers(root)
