"""``python -m minitorch_accum.cli`` is the ``maccum`` command."""

import signal
import sys

from minitorch_accum.cli.main import main

status = main()
# the command's exit status is decided (a run it trained is written or checkpointed): a signal during the
# interpreter's teardown must not turn it into a death by signal
for _signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signum, signal.SIG_IGN)
sys.exit(status)
