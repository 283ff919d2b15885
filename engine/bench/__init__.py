"""The engine side of ``logitscope bench``: model shapes built to measure, the harness that runs
turns on the real engines, the per-process workers, and the sections that time MLX, llama.cpp
and the sampler. The front end (flags, plan, the report on screen, the app's own probes) is
`tui.bench`, which runs these sections; nothing here imports Textual.

Importing this package stays cheap (no MLX): the fast BLAS must be chosen before MLX loads.
"""
