"""``python -m rocketlake.jobs.cli``: the `rocketlake` program."""
import sys

from rocketlake.jobs.cli import main

sys.exit(main())
