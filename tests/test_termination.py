"""runner/termination.py: SIGTERM raises Interrupted outside the measuring loop, only sets the event inside it and
while the command line loads, and leaves the last upload what remains of its budget."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from deploy_tools import stages
from helpers import REPO
from runner import termination
from runner.termination import Interrupted, Termination


def test_sigterm_outside_the_loop_raises_and_inside_only_sets_the_event():
    t = Termination()
    with t.flagging() as stop:
        t._handle(signal.SIGTERM, None)  # inside: no exception, the loop sees the event
        assert stop.is_set()
    with pytest.raises(Interrupted):
        t._handle(signal.SIGTERM, None)  # outside again: raises
    assert not isinstance(Interrupted(), Exception)  # so no `except Exception` on the way swallows it


def test_sigterm_while_the_command_line_loads_only_sets_the_event_until_armed(monkeypatch):
    """Installed, not yet armed (the command line's modules loading): raised inside an import, Interrupted escaped
    main() as a traceback, exit 1 (a fixed sleep before the signal met that window on a busy machine)."""
    t = Termination()
    monkeypatch.setattr(termination.signal, "signal", lambda signum, handler: None)  # this process keeps its own
    t.install()
    t._handle(signal.SIGTERM, None)  # no exception: the event only
    assert t.event.is_set()
    t.arm()
    with pytest.raises(Interrupted):
        t._handle(signal.SIGTERM, None)  # armed: raises, as before it was installed


def test_a_sigterm_that_came_while_the_command_line_loaded_exits_75_as_main_begins(monkeypatch, capsys):
    from runner import cli

    monkeypatch.setattr(cli.TERMINATION, "event", threading.Event())
    cli.TERMINATION.event.set()
    assert cli.main(["list"]) == cli.EXIT_SIGTERM
    assert capsys.readouterr().err == "interrupted by SIGTERM before measuring began; nothing to upload\n"


def test_a_process_that_imported_the_command_line_is_armed():
    """Once runner.cli has loaded, SIGTERM raises again; a fresh interpreter, as this one's in-process runs leave it
    armed whatever cli does."""
    code = "import runner.cli; from runner.termination import TERMINATION; print(TERMINATION.raising)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout == "True\n", done.stderr


def test_the_run_loops_benchmark_script_leaves_sigterm_as_python_has_it():
    """scripts/bench_supervisor.py reads the run id's variable from runner, not runner.cli, whose import armed SIGTERM
    to raise Interrupted: a SIGTERM to the script ended it with that traceback."""
    code = ("import importlib.util, signal, sys; spec = importlib.util.spec_from_file_location('bench', "
            "'scripts/bench_supervisor.py'); spec.loader.exec_module(importlib.util.module_from_spec(spec)); "
            "print('runner.cli' in sys.modules, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.stdout == "False True\n", done.stderr


def test_the_upload_gets_what_is_left_of_its_budget_and_at_least_a_second(monkeypatch):
    t, now = Termination(), [100.0]
    monkeypatch.setattr(termination.time, "monotonic", lambda: now[0])
    assert t.left() == termination.SIGTERM_UPLOAD_S  # no SIGTERM yet
    with t.flagging():
        t._handle(signal.SIGTERM, None)
    now[0] += 2.5
    with t.flagging():
        t._handle(signal.SIGTERM, None)  # a second SIGTERM does not restart the clock
    assert t.left() == pytest.approx(termination.SIGTERM_UPLOAD_S - 2.5)
    now[0] += 60
    assert t.left() == 1.0


def test_a_sigterm_after_the_cells_were_measured_changes_nothing_the_run_says_or_returns(monkeypatch, capsys, tmp_path):
    """Past the measuring loop, SIGTERM raised Interrupted while the closing tables printed: main() said 'before
    measuring began; nothing to upload' and exited 75 where every cell was measured and uploaded."""
    from helpers import in_process, spec_data, write_spec
    from runner import cli

    monkeypatch.setattr(cli.TERMINATION, "event", threading.Event())  # this process's later runs keep theirs
    monkeypatch.setattr(cli.TERMINATION, "at", None)
    report = cli._run_report

    def signalled_report(*args, **kwargs):
        cli.TERMINATION._handle(signal.SIGTERM, None)  # as the handler is called when the signal comes
        return report(*args, **kwargs)

    monkeypatch.setattr(cli, "_run_report", signalled_report)
    path = write_spec(tmp_path / "s.yaml", spec_data())
    done = in_process(capsys, "run", path, "--out", tmp_path / "out", "--spool", tmp_path / "spool", "--run-id", "r")
    assert done.code == 0 and "before measuring began" not in done.err, done
    assert cli.TERMINATION.event.is_set() and cli.TERMINATION.raising  # flagged while it closed, raising again after


def image_command(target: str) -> list[str]:
    """What the image of the Dockerfile's `target` stage runs when given no arguments (its ENTRYPOINT, then its CMD),
    its programs found on this machine: attnbench the venv's; skipped where one is missing (make test-tools installs
    tini)."""
    lines = stages()[target]
    (entrypoint,) = [json.loads(line.removeprefix("ENTRYPOINT ")) for line in lines if line.startswith("ENTRYPOINT ")]
    (command,) = [json.loads(line.removeprefix("CMD ")) for line in lines if line.startswith("CMD ")]
    found = []
    for word in entrypoint:
        path = word if word.startswith("-") else shutil.which(word)
        path = REPO / ".venv/bin/attnbench" if word == "attnbench" else path
        if path is None:
            pytest.skip(f"{word} is not on PATH (make test-tools installs it)")
        found.append(str(path))
    return found + command


@pytest.mark.parametrize("target", ["runner", "dashboard"])
def test_a_sigterm_before_the_handler_is_installed_ends_the_image_at_once_as_pid_1(tmp_path, target):
    """A container's PID 1 gets no signal it has no handler for: the runner as PID 1 (ENTRYPOINT ["attnbench"]) lost a
    SIGTERM that came before runner.termination installed its handler and ran on (here its CMD, --help, to its exit 0;
    a run, until the pod's grace period ended in SIGKILL), and the dashboard one that came before streamlit installed
    its handler (here it serves on until the test gives up). Under the images' init, tini, attnbench is PID 1's child
    and such a SIGTERM ends it at once (143). Its first milliseconds are held open by a sitecustomize that sleeps, a
    real signal sent to PID 1 of a PID namespace of its own (unshare), as the kubelet sends it to the container's, and
    a network namespace of its own, where the dashboard's port is free whatever this machine serves."""
    if subprocess.run(["unshare", "-rnpf", "true"], capture_output=True).returncode != 0:
        pytest.skip("no PID and network namespace can be made here (unshare -rnpf)")
    started = tmp_path / "started"
    (tmp_path / "sitecustomize.py").write_text(f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(5)\n")
    unshare = subprocess.Popen(["unshare", "-rnpf", "--mount-proc", "--kill-child", *image_command(target)],
                               env={**os.environ, "PYTHONPATH": str(tmp_path)}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not started.exists():
            assert time.monotonic() < deadline and unshare.poll() is None, "attnbench never started"
            time.sleep(0.01)
        with open(f"/proc/{unshare.pid}/task/{unshare.pid}/children") as f:  # unshare forks: its child is PID 1 there
            os.kill(int(f.read().split()[0]), signal.SIGTERM)
        assert unshare.wait(30) == 128 + signal.SIGTERM, unshare.stderr.read()  # as PID 1 it ran on
    finally:
        unshare.kill()  # where the test failed: --kill-child ends the namespace with it
        unshare.wait()
