"""``python -m engine.process``: the engine process (`engine.process.child`)."""

import sys

from engine.process.child import main

sys.exit(main())
