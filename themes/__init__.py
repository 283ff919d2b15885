"""Built-in themes, as TOML data files beside this module (see `tui.app.themes` for the loader)."""
