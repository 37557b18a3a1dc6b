"""``python -m tests.soak --minutes N [--clusters 10] [--seed S] [--out DIR]``."""

import sys

from tests.soak._run import main

sys.exit(main())
