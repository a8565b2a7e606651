"""``python -m tmath``: see :mod:`tmath.cli`."""

import sys

from tmath.cli import main

sys.exit(main())
