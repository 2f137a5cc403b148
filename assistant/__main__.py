"""`python -m assistant` is `torchhelp`."""

import sys

from assistant.cli import main

sys.exit(main())
