"""`python -m bertforge ...` (also what torchrun launches)."""

import sys

from .cli import main

sys.exit(main())
