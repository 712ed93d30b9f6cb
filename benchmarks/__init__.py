"""Benchmark scripts, each run as ``python benchmarks/<name>.py``.

A package only so that type checkers name these modules ``benchmarks.*`` rather than letting
``benchmarks/ranking.py`` collide with the ``ranking`` app.
"""
