"""logitscope's engines and the core they share: MLX inference (and llama.cpp, and remote servers)
behind a small, typed, async API.

Nothing in this package imports Textual. The tree shows the architecture (docs/architecture.md):

- `core/`: what every front end and engine shares, with no Textual and no MLX: the contract
  (`core.api`), the conversation (`core.chat`), `core.settings`, the library (`core.library`),
  printable text (`core.text`), parameter steps;
- `local/`: the engine proper: the engine thread, its commands and async facade (`worker`,
  `commands`, `client`, `watchdog`), the loader seam (`loaders`), a turn (`turn`, `session`,
  `snapshots`, `prompt`, `warmup`, `lastrow`, `precision`, `kvdisk`), what-if previews
  (`preview`), sampling (`sampling`, `penalties`), text (`textstream`), the backend (`backend`);
- `gguf/`: GGUF files on llama.cpp, loaded through `local`'s seam (`gguf.loader`);
- `remote/`: the same API over an OpenAI-compatible server; `scripted`: the scripted test double;
- `cpu/`: the CPU speed layer, entered only through `engine.cpu.install` and never imported on a
  GPU backend;
- `models/`: where models come from (the demo, folders, the hub, GGUF files) and loading them;
- `factory`: the one place a front end gets its engine (`build_engine`).

The app and the headless commands use `engine.core`, `engine.factory` and the public names of
`engine.models`; the benchmark (`tui.bench`) measures the engines from inside. MLX itself is only
imported on the engine thread, so importing this package stays cheap.
"""

import os as _os

# Without PyTorch, transformers prints "PyTorch was not found..." on stderr when it is imported:
# over the app's screen (a server's tokenizer loads while the TUI runs) or into `run`'s output.
# mlx-lm switches these advisory lines off when it is imported, but some paths reach transformers
# first (engine.remote.tokens, tui.bench); each imports this package before, so the switch is
# set here, as mlx-lm sets it (a value the user set is kept).
_os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
