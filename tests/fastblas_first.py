"""A pytest plugin (`-p fastblas_first`, with tests/ on PYTHONPATH) that loads OpenBLAS before any
test module imports MLX, as `logitscope` itself does at start.

Why: whether MLX binds its BLAS calls to OpenBLAS is decided when MLX is first imported, and test
modules import it at collection; in a plain test run the engine therefore reports "MLX built-in"
and the speed-ups that need a fast BLAS (4-bit layers unpacked for prompts, gemv forwarding) stay
off. `tests/test_families.py` runs its matrix once more in a fresh interpreter with this plugin,
so every CPU speed-up is on there.
"""

from engine.cpu.blas import enable_fast_blas

enable_fast_blas()
