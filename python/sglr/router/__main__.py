"""`python -m sglr.router`: the `sglr-router` command."""

import sys

from sglr.router.launch import main

sys.exit(main())
