"""``python -m minitorch_accum.kernels list | compile [--arch sm_90] [--resource-usage]``."""

from __future__ import annotations

from minitorch_accum.kernels.tools.command import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
