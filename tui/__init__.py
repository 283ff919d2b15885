"""logitscope's front ends, everything a person drives from a terminal: the Textual app (`app`),
the headless commands (`headless`), the benchmark (`bench`) and the console script (`main`). The
app and the headless commands never import MLX and talk to an `engine.core.api.EngineAPI` made by
`engine.factory`; the layer rules are in docs/architecture.md."""
