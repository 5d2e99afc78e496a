"""The tutorial runs exactly as written: its snippets, in order, against a private Redis.

The test does what a reader of docs/tutorial.md (the README's tutorial, included) does,
in a fresh directory:

- a ```` ```python ```` block whose first line is ``# NAME.py`` is saved as NAME.py;
  any other is saved as ``stepN.py`` (N the step it is in) and run as
  ``python stepN.py``, as step 4 says;
- each line of a ```` ```sh ```` block is a command, run by bash in that directory
  with the variables exported so far; a command whose comment says ``leave it running``
  is started in the background (in a shell of its own, as the page says) and must still
  be running when the tutorial ends; any other must exit 0;
- between step 2 and step 3 it waits, as the page says, until the worker has run
  ``proj.read_sensor``.

The one change to the text: the port the page gives its Redis (6390) is replaced by a
free one, so the test never touches a Redis someone else runs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
import redis
from celery import Celery

from celery_periodiq import periodiq
from celery_periodiq.localredis import _free_port as free_port
from tests.processes import wait_for
from tests.test_docs import DOCS, ROOT, blocks, rendered

PAGE_PORT = "6390"
STEP = re.compile(r"^\*\*(\d+)\. ", re.M)


def steps() -> list[tuple[int, str, str]]:
    """The tutorial's code blocks in order, each with the step it is in: (step, tag, code)."""
    text = rendered(DOCS / "tutorial.md")
    found = []
    for number, part in zip(
        [int(n) for n in STEP.findall(text)], STEP.split(text)[2::2], strict=True
    ):
        found += [(number, tag, code) for tag, code in blocks(part) if tag in ("python", "sh")]
    return found


class Reader:
    """A reader at a shell: a directory, what they exported, what they left running."""

    def __init__(self, folder: Path, port: int) -> None:
        self.folder = folder
        self.port = port
        bin_dir = str(Path(sys.executable).parent)
        self.env = {
            **os.environ,
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
            "PYTHONPATH": str(ROOT),  # this checkout's celery_periodiq, as installed
        }
        self.env.pop("REDIS_URL", None)
        self.background: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def as_written(self, command: str) -> str:
        return command.replace(PAGE_PORT, str(self.port))

    def run(self, line: str) -> subprocess.CompletedProcess[str]:
        command = self.as_written(line)
        exported = re.match(r"export (\w+)=(\S+)", command)
        if exported:
            self.env[exported[1]] = exported[2]
        done = subprocess.run(
            ["bash", "-c", command], cwd=self.folder, env=self.env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        return done

    def leave_running(self, line: str) -> None:
        log = self.folder / f"background-{len(self.background)}.log"
        with log.open("wb") as handle:
            process = subprocess.Popen(
                ["bash", "-c", f"exec {self.as_written(line)}"], cwd=self.folder,
                env=self.env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.background.append((line, process, log))

    def logs(self) -> str:
        return "\n".join(f"--- {line}\n{log.read_text()}" for line, _, log in self.background)

    def stop(self) -> None:
        """Ctrl-C in each shell, as the tutorial ends."""
        for _, process, _ in reversed(self.background):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for _, process, _ in self.background:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def sensor_ran(redis_url: str) -> bool:
    app = Celery("proj", broker=redis_url, set_as_current=False)
    try:
        events = periodiq(app).history("proj.read_sensor")
    except Exception:  # not declared yet: the beats are starting
        return False
    return any(event.kind == "succeeded" for event in events)


def test_the_tutorial_has_its_steps_in_order() -> None:
    found = steps()
    assert [number for number, _, _ in found] == [0, 1, 2, 3, 4]
    assert found[1][2].startswith("# proj.py\n")
    assert "from proj import app" in found[4][2]


@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    reader = Reader(tmp_path, free_port())
    outputs: dict[int, str] = {}
    try:
        for number, tag, code in steps():
            if tag == "python":
                first = code.splitlines()[0]
                name = first[2:] if first.startswith("# ") else f"step{number}.py"
                (tmp_path / name).write_text(code)
                if name == f"step{number}.py":
                    outputs[number] = reader.run(f"python {name}").stdout
                continue
            if number == 3:  # "Look at what happens": once the worker printed `sensor`
                wait_for(lambda: sensor_ran(reader.env["REDIS_URL"]), 60, "a run of read_sensor")
            for line in code.splitlines():
                if "leave it running" in line:
                    reader.leave_running(line)
                else:
                    outputs[number] = outputs.get(number, "") + reader.run(line).stdout
            if number == 0:  # the Redis answers before anything uses it
                client = redis.Redis.from_url(reader.env["REDIS_URL"])
                wait_for(partial(_pings, client), 20, "the tutorial's Redis")
        for line, process, _ in reader.background:
            assert process.poll() is None, f"{line} stopped:\n{reader.logs()}"
    except BaseException:
        print(reader.logs())
        raise
    finally:
        reader.stop()
    logs = reader.logs()
    assert f"proj: schedule and broker in redis://127.0.0.1:{reader.port}/0" in logs
    assert re.search(r"\] sensor$", logs, re.M), "the worker did not print `sensor`"
    assert "proj.make_report" in outputs[3]
    assert "monthly-billing" in outputs[3]
    assert "['poll-mailbox-42']" in outputs[4]


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        time.sleep(0.1)
        return False


def test_proj_refuses_to_start_without_redis_url(tmp_path: Path) -> None:
    proj = next(code for _, tag, code in steps() if code.startswith("# proj.py\n"))
    (tmp_path / "proj.py").write_text(proj)
    env = {key: value for key, value in os.environ.items() if key != "REDIS_URL"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", "import proj"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == "proj.py: set REDIS_URL to the Redis to use (step 0)"
