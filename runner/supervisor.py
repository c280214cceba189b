"""Workers seen from the supervisor: started per library set, fed one cell at a time, stopped, or replaced when
one dies or runs past the cell's time limit. At most one worker holds the GPU at a time; the next group's may
wait beside it as a spare, its libraries loaded, until its turn.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from multiprocessing.connection import Connection
from pathlib import Path

from runner.worker import Hello, Job, Settings, Start

POLL_S = 0.2  # how often a wait looks at the stop flag
STOP_GRACE_S = 5.0
CGROUP_EVENTS = Path("/sys/fs/cgroup/memory.events")


class WorkerLost(Exception):
    """The worker did not answer: it died (status crashed or oom) or ran out of time (timeout)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class Stopped(Exception):
    """The run was asked to stop (SIGTERM) while waiting for a worker."""


def oom_kills() -> int | None:
    """The kernel's OOM kills in this container's cgroup so far (cgroup v2), or None where unreadable."""
    try:
        for line in CGROUP_EVENTS.read_text().splitlines():
            name, _, count = line.partition(" ")
            if name == "oom_kill":
                return int(count)
    except (OSError, ValueError):
        return None
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Worker:
    """One `python -m runner.worker` process and the two pipes to it; its stderr is passed on and its tail kept."""

    def __init__(self, start: Start | str, stop: threading.Event, timeout_s: float):
        """Start the process with `start` (waiting for its hello), or with a group's name: a spare that loads its
        libraries and waits for `begin`."""
        self.group = start if isinstance(start, str) else start.group
        self.stop_event = stop
        to_worker, from_worker = os.pipe(), os.pipe()
        # not `-m runner.worker`: its classes would pickle as __main__'s
        command = [sys.executable, "-c", "import sys; from runner.worker import main; main(sys.argv[1:])",
                   str(to_worker[0]), str(from_worker[1])]
        self.process = subprocess.Popen(command, pass_fds=(to_worker[0], from_worker[1]), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_worker[0])
        os.close(from_worker[1])
        self.outbox = Connection(to_worker[1], readable=False)
        self.inbox = Connection(from_worker[0], writable=False)
        self.tail: deque[str] = deque(maxlen=20)
        threading.Thread(target=self._pass_on_stderr, name=f"attnbench-{self.group}-stderr", daemon=True).start()
        self.oom_before = oom_kills()
        self.hello: Hello | None = None
        if isinstance(start, str):
            self.outbox.send(("hold", start))
        else:
            self.begin(start, timeout_s)

    def begin(self, start: Start, timeout_s: float) -> None:
        """Start measuring (a spare's turn): the worker starts its GPU backend and says hello."""
        try:
            self.outbox.send(("start", start))
        except (BrokenPipeError, OSError):
            raise self._death("starting") from None
        self.hello = self._answer(timeout_s, "starting")

    def _pass_on_stderr(self) -> None:
        for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip()
            if line:
                self.tail.append(line)
                print(f"[{self.group} worker] {line}", file=sys.stderr, flush=True)

    def last_words(self) -> str:
        """What the worker last said on stderr, for a crash's reason: a fatal error's headline, else its last line."""
        lines = [line.strip() for line in self.tail if line.strip()]
        fatal = [line for line in lines if line.startswith("Fatal Python error")]
        return (fatal or lines or ["nothing on stderr"])[-1][:300]

    def _answer(self, timeout_s: float, doing: str):
        """The worker's next message, or WorkerLost; Stopped when the run is asked to stop meanwhile."""
        deadline = time.monotonic() + timeout_s
        while not self.inbox.poll(POLL_S):
            if self.stop_event.is_set():
                raise Stopped()
            if time.monotonic() > deadline:
                self.kill()
                raise WorkerLost("timeout", f"no result after {timeout_s:g} s {doing}; the worker was stopped "
                                 f"(last stderr: {self.last_words()})")
        try:
            return self.inbox.recv()[1]
        except (EOFError, OSError):
            raise self._death(doing) from None

    def _death(self, doing: str) -> WorkerLost:
        try:
            code = self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        how = f"killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
        before, after = self.oom_before, oom_kills()
        if before is not None and after is not None and after > before:
            return WorkerLost("oom", f"the worker was {how} by the kernel's out-of-memory killer while {doing}")
        return WorkerLost("crashed", f"the worker {how} while {doing} (last stderr: {self.last_words()})")

    def measure(self, job: Job, timeout_s: float) -> str:
        """The job's record (JSON) from the worker (never asked of a worker whose libraries failed to load)."""
        try:
            self.outbox.send(("measure", job))
        except (BrokenPipeError, OSError):
            raise self._death("receiving the cell") from None
        return self._answer(timeout_s, "measuring")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """Ask the worker to finish, then make sure it did."""
        try:
            self.outbox.send(("stop", None))
            self.process.wait(timeout=STOP_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class Pool:
    """The run's workers by library set, one measuring at a time (a spare of the next group may wait); a dead one
    is replaced when next needed. The first worker started describes the machine; every later one is given it."""

    def __init__(self, settings: Settings, stop: threading.Event, start_timeout_s: float):
        self.settings, self.stop_event, self.start_timeout_s = settings, stop, start_timeout_s
        self.current: Worker | None = None
        self.spare: Worker | None = None
        self.hellos: dict[str, Hello] = {}  # each group's first hello: its libraries and start, for the manifest
        self.first: Hello | None = None  # the describing worker's: the machine, its idle state, the device

    def _start(self, group: str) -> Start:
        first = self.first
        if first is None:
            return Start(group, self.settings, describe=True)
        return Start(group, self.settings, machine=first.machine, idle=first.idle)

    def worker(self, group: str) -> Worker:
        """The live worker of `group`, starting it (or the spare loaded for it), and stopping another group's."""
        if self.current and (self.current.group != group or not self.current.alive()):
            self.current.stop()
            self.current = None
        if self.current is None:
            spare, self.spare = self.spare, None
            if spare and spare.group == group and spare.alive():
                self.current = spare  # a spare that dies starting is the current one: `lose` forgets it
                spare.begin(self._start(group), self.start_timeout_s)
            else:
                if spare:
                    spare.kill()
                self.current = Worker(self._start(group), self.stop_event, self.start_timeout_s)
            if self.first is None and not self.current.hello.error:
                self.first = self.current.hello
            self.hellos.setdefault(group, self.current.hello)
        return self.current

    def prepare(self, group: str | None) -> None:
        """Have `group`'s worker load its libraries now, as a spare, while the current one measures."""
        if group is None or (self.spare and self.spare.group == group) or \
                (self.current and self.current.group == group):
            return
        if self.spare:
            self.spare.kill()
        self.spare = Worker(group, self.stop_event, self.start_timeout_s)

    def lose(self) -> None:
        """Forget the current worker after it died or was killed."""
        if self.current:
            self.current.kill()
        self.current = None

    def close(self) -> None:
        for worker in (self.current, self.spare):
            if worker:
                worker.stop()
        self.current = self.spare = None

    def kill(self) -> None:
        """Stop now: a SIGTERM abandons the cell in flight."""
        for worker in (self.current, self.spare):
            if worker:
                worker.kill()
        self.current = self.spare = None
