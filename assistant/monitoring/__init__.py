"""Evidence over time from the Prometheus a GPU site already runs (issue 26).

``config`` finds the server and its credentials, ``client`` talks to its HTTP API (every
failure one line), ``check`` says what the server holds (exporters, the host label, the scrape
interval), ``signatures`` loads the metric signatures (probes/faults/metrics/*.yaml) and
``window`` judges them over an incident window, aggregated on the server. No UI, no runbooks:
the walk and the command line call it.
"""
