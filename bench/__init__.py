"""Reproducible benchmarks: ``python -m bench.<name>``; results go to bench/results/."""
