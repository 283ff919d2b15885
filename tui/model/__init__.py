"""Textual-free data: the conversation tree and parameter arithmetic."""
