"""The bottom layer: errors, JSON helpers and caches, which every other layer may use."""
