"""One module per screen; the registry (``assistant.tui.registry``) opens them by name."""
