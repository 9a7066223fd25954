"""Imported first by the fork server (before torch and numpy): the libraries it loads start no
thread pool, so no server forked from it has a thread before its confinement's rules. A server
gets its cell's threads once confined (:func:`dpkit.boundary.threads.limit_threads`). Never
imported by a client: importing it changes this process's environment."""

import os

from dpkit.boundary.threads import HELPER_SETTINGS, THREAD_VARIABLES

for _variable in THREAD_VARIABLES:
    os.environ[_variable] = "1"
for _variable, _value in HELPER_SETTINGS.items():
    os.environ.setdefault(_variable, _value)
