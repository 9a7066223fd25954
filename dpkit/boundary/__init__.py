"""The process boundary: a cell's server runs in its own process and sees only bytes.

:mod:`~dpkit.boundary.host` is the server process's side (builds the defense's server from public
inputs, answers messages, runs the attacks); :mod:`~dpkit.boundary.channel` starts it and carries
bytes to it (a forkserver child, a Ray actor, or — for benchmarks only — the same process);
:mod:`~dpkit.boundary.public` is what a server may load.
"""
