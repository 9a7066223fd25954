"""The embedding toolkit: vocabularies with their tables, nearest-neighbour search, metric noise."""
