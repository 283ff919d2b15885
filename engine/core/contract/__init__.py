"""The plain data that crosses the engine's door, in modules by subject. `engine.core.api` is
the door: it defines what every number means and re-exports every name here; import from it."""
