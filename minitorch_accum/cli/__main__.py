"""``python -m minitorch_accum.cli`` is the ``maccum`` command."""

import sys

from minitorch_accum.cli.main import main

sys.exit(main())
