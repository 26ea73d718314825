"""``python -m tcmqa``: the same as the ``tcmqa`` command."""

import sys

from tcmqa.cli import main

sys.exit(main())
