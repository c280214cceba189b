"""SIGTERM, handled from the first instant of the process (a Spot notice gives a pod 15 s).

Outside the measuring loop SIGTERM raises Interrupted, which the command line turns into exit 75; inside it,
SIGTERM only sets an event that the loop checks at least every 0.2 s, so no write is cut in half. While the
command line's modules load (installed, not yet armed) it only sets the event too: raised inside an import, it
would escape main() as a traceback and exit 1; main() raises it as it begins.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

SIGTERM_UPLOAD_S = 7.0  # after SIGTERM, the last upload gets this long: exit comes inside 10 s


class Interrupted(BaseException):
    """SIGTERM arrived outside the measuring loop (starting up, reading the store). A BaseException, as
    KeyboardInterrupt is, so that no `except Exception` on the way swallows it."""


class Termination:
    """SIGTERM, from the first instant of the process: raises Interrupted, except inside the measuring loop,
    which only sets `event` and stops at the next check (every 0.2 s at most)."""

    def __init__(self):
        self.event = threading.Event()
        self.raising = True
        self.at: float | None = None

    def install(self) -> None:
        """Handle SIGTERM from here, setting the event only until arm()."""
        self.raising = False
        signal.signal(signal.SIGTERM, self._handle)

    def arm(self) -> None:
        """Raise Interrupted on SIGTERM from here on (the modules loaded); one that came before is in the event."""
        self.raising = True

    def _handle(self, signum, frame) -> None:
        if not self.event.is_set():
            self.at = time.monotonic()
            print("SIGTERM: stopping; what is measured is uploaded, a cell in flight is abandoned", file=sys.stderr, flush=True)
        self.event.set()
        if self.raising:
            raise Interrupted()

    @contextmanager
    def flagging(self) -> Iterator[threading.Event]:
        """Inside: SIGTERM sets the event only."""
        self.raising = False
        try:
            yield self.event
        finally:
            self.raising = True

    def left(self) -> float:
        """Seconds left of the upload budget after SIGTERM."""
        return max(1.0, SIGTERM_UPLOAD_S - (time.monotonic() - self.at)) if self.at else SIGTERM_UPLOAD_S


TERMINATION = Termination()
