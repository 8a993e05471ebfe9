"""``python -m assistant.cli``: the same as the ``diag`` command."""

import sys

from . import main

sys.exit(main())
