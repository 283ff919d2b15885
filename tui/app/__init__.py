"""The Textual app: the application (`application`), its screens and widgets, the controller that
talks to the engine, the bindings table, themes and messages. It never imports MLX."""
