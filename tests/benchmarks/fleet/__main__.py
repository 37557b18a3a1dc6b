"""``python -m tests.benchmarks.fleet [--quick] [--out DIR]``."""

import sys

from tests.benchmarks.fleet._run import main

sys.exit(main())
