"""`python -m tui.headless run ...`: the headless CLI without the TUI's entry point."""

import sys

from tui.headless.run import main

sys.exit(main())
