"""``python -m sessionstore``: the command line."""

import sys

from sessionstore.cli import main

sys.exit(main())
