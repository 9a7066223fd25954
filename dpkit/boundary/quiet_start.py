"""Imported first by the fork server (before torch and numpy): the libraries it loads start no
thread pool, nor a progress bar's monitor, so the fork server stays one thread
(:mod:`dpkit.boundary.fork_check`) and no server forked from it has a thread before its
confinement's rules. A server gets its cell's threads once confined
(:func:`dpkit.boundary.threads.limit_threads`), and its BLAS threads sleep when idle
(:data:`dpkit.boundary.threads.SPIN_SETTING`). Its allocator keeps what it frees
(:mod:`dpkit.boundary.heap`). Never imported by a client: importing it changes this process's
environment."""

import os

from dpkit.boundary.heap import keep_freed_memory
from dpkit.boundary.threads import SPIN_SETTING, THREAD_VARIABLES, quiet_helper_threads

for _variable in THREAD_VARIABLES:
    os.environ[_variable] = "1"
os.environ.setdefault(*SPIN_SETTING)
quiet_helper_threads()
keep_freed_memory()
