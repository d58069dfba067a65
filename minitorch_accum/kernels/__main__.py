"""``python -m minitorch_accum.kernels list | compile [--arch sm_90] [--resource-usage]``."""

from __future__ import annotations

import os
import signal

from minitorch_accum.kernels.tools.command import main

__all__ = ["main"]

if __name__ == "__main__":
    try:
        status = main()
    except BrokenPipeError:  # | head: stop quietly, as a command killed by SIGPIPE does
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        status = 128 + signal.SIGPIPE
    raise SystemExit(status)
