"""logitscope's engine: MLX inference behind a small, typed, async API.

Nothing in this package imports Textual. The tree shows the architecture (docs/architecture.md):

- the engine proper, at this level: the contract (`api`), the engine thread and its async facade
  (`worker`, `client`), a turn (`turn`, `session`, `prompt`, `warmup`, `lastrow`, `precision`),
  sampling (`sampling`, `penalties`), text (`textstream`), which backend runs (`backend`), and the
  test double (`fake`);
- `cpu/`: the CPU speed layer, entered only through `engine.cpu.install` and never imported on a
  GPU backend;
- `models/`: where models come from (the demo, folders, the hub) and loading them;
- `settings/`: the config files and where logitscope keeps its files;
- `cli/`: the headless `logitscope run`; `bench/`: `logitscope bench`.

The public surface for a front end is `engine.api` (plain data and the `EngineAPI` protocol),
`engine.client.Engine` (the real implementation), `engine.fake` (the scripted one) and the public
names of `engine.settings` and `engine.models`. MLX itself is only imported on the engine thread,
so importing this package stays cheap.
"""
