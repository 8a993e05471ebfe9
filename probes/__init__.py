"""Read-only probes: the command each sends, a pure parser, and pure checks.

Nothing in this package does I/O of its own; transports in ``assistant.fleet`` run the commands.
"""
