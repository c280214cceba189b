"""A worker's process and the two pipes to it, started without importing any of the measuring code: the command line
starts the run's first worker this way before it reads the spec, so that the worker's Python and JAX load while
the supervisor loads its own modules, the spec and the store (runner/supervisor.py adopts it as its spare).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection

# not `-m runner.worker`: its classes would pickle as __main__'s
COMMAND = "import sys; from runner.worker import main; main(sys.argv[1:])"


@dataclass
class Launched:
    """A `runner.worker` process; `hold`: the library set it was told to load and wait with (a spare), if any."""

    process: subprocess.Popen
    outbox: Connection  # supervisor -> worker
    inbox: Connection  # worker -> supervisor
    hold: str | None = None

    def kill(self) -> None:
        """End the process now, if it still runs (a head start the run never took, or took and stopped)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def launch(hold: str | None = None) -> Launched:
    """Start a worker process; with `hold`, tell it at once to load that group's libraries and wait (runner/worker.py)."""
    to_worker, from_worker = os.pipe(), os.pipe()
    process = subprocess.Popen([sys.executable, "-c", COMMAND, str(to_worker[0]), str(from_worker[1])],
                               pass_fds=(to_worker[0], from_worker[1]), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(to_worker[0])
    os.close(from_worker[1])
    launched = Launched(process, Connection(to_worker[1], readable=False), Connection(from_worker[0], writable=False),
                        hold)
    if hold is not None:
        try:
            launched.outbox.send(("hold", hold))
        except OSError:  # it died already: found when the run begins it, and replaced (runner/supervisor.py)
            pass
    return launched
