"""Runbooks: the YAML model, its validation, and the engine that walks it. No UI here."""
