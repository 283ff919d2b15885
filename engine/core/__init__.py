"""The core: what every front end and every engine shares, with no Textual and no MLX.

- `api`: the contract between front ends and engines (plain frozen data, the `EngineAPI` protocol);
- `chat`: the conversation (tree, file format, context fitting, exports) and its one owner;
- `settings`: `config.toml` as typed objects, and where logitscope keeps its files;
- `library`: the one store of conversations (SQLite);
- `text`: untrusted text made printable, and shortened for one line;
- `param_steps`: stepping and typing sampling parameters.
"""
