"""Benchmarks run by hand (``.venv/bin/python bench/NAME.py``), and what they share with the
tests: ``bench.synth`` builds the synthetic fleet history both time and check correlation on."""
