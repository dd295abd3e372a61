"""No orphan processes: a worker dies with the process that started it, whatever kills that.

On Linux the kernel delivers SIGKILL to the worker when its parent exits
(`prctl(PR_SET_PDEATHSIG)`), even when the parent itself was SIGKILLed. As a second line (other
systems, or a parent that exits in the moment before the call), a thread polls the parent pid.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent is already gone
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="sglr-parent-watch", daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(1)
