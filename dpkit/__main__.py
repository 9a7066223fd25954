"""``python -m dpkit``: the same command line as the ``dpkit`` script."""

import sys

from dpkit.cli.main import main

sys.exit(main())
