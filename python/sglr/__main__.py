"""`python -m sglr`: the HTTP server (the same as `sglr-server`)."""

import sys

from sglr.server.launch import main

sys.exit(main())
