"""logitscope's engine: MLX inference behind a small, typed, async API.

Nothing in this package imports Textual. The tree shows the architecture (docs/architecture.md):

- the engine proper, at this level: the contract (`api`), the engine thread, its commands and its
  async facade (`worker`, `commands`, `client`, `watchdog`), a turn (`turn`, `session`,
  `snapshots`, `prompt`, `warmup`, `lastrow`, `precision`, `kvdisk`), what-if previews (`preview`),
  sampling (`sampling`, `penalties`), text (`textstream`), which backend runs (`backend`), and the
  test double (`fake`);
- `cpu/`: the CPU speed layer, entered only through `engine.cpu.install` and never imported on a
  GPU backend;
- `models/`: where models come from (the demo, folders, the hub) and loading them;
- `settings/`: the config files and where logitscope keeps its files;
- `library/`: the conversation library (SQLite), shared by the app and `logitscope run`;
- `remote/` and `gguf/`: two more `EngineAPI`s, over HTTP and on llama.cpp;
- `cli/`: the headless `logitscope run`; `bench/`: `logitscope bench`.

The public surface for a front end is `engine.core.api` (plain data and the `EngineAPI` protocol),
the engines (`engine.local.client.Engine`, `engine.remote`, `engine.gguf`, `engine.scripted`'s scripted one)
and the public names of `engine.core.settings`, `engine.models` and `engine.core.library`. MLX itself is only
imported on the engine thread, so importing this package stays cheap.
"""

import os as _os

# Without PyTorch, transformers prints "PyTorch was not found..." on stderr when it is imported:
# over the app's screen (a server's tokenizer loads while the TUI runs) or into `run`'s output.
# mlx-lm switches these advisory lines off when it is imported, but some paths reach transformers
# first (engine.remote.tokens, tui.bench); each imports this package before, so the switch is
# set here, as mlx-lm sets it (a value the user set is kept).
_os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
