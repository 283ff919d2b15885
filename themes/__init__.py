"""Built-in themes, as TOML data files beside this module (see `tui.themes` for the loader)."""
