"""Screens: the chat, help and small dialogs."""
