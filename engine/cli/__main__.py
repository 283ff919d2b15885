"""`python -m engine.cli run ...`: the headless CLI without the TUI's entry point."""

import sys

from engine.cli.run import main

sys.exit(main())
