"""`python -m assistant` is `torchhelp`."""

from assistant.cli import leave, main

leave(main())
