"""Command-line interface: one module per sub-command, each with ``register(subparsers)``."""
