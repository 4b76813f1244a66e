"""``python -m sarek_py.cli``."""

import sys

from sarek_py.cli.main import main

sys.exit(main())
