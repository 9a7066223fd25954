"""Moved to :mod:`dpkit.spec.cells`; kept so ``from dpkit.runner.cells import expand`` works."""

from dpkit.spec.cells import Cell, SweepError, cell_key, expand, grid, make_cell, set_path

__all__ = ["Cell", "SweepError", "cell_key", "expand", "grid", "make_cell", "set_path"]
