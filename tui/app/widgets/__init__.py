"""Small, dumb widgets: reactive attributes down, messages up."""
