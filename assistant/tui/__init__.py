"""The Textual front end of diag: symptom search, runbook walks, KB articles.

The TUI only imports the core (``assistant.runbook``, ``assistant.fleet``, ``assistant.match``,
``assistant.kb``, ``assistant.target``); the core never imports it. ``run_app`` in
``assistant.tui.app`` is the entry point the CLI calls.
"""
