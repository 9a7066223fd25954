"""Imported by the fork server once its plug-ins are imported (just before
:mod:`dpkit.boundary.fork_check`): it does there, once, what every server would otherwise do
alike before its rules — find the C library (``ldconfig`` runs for it) and read the imported
modules' folders for its readable roots (:func:`dpkit.boundary.confine.readable_roots`) — so each
server inherits the result. Nothing here depends on a cell, and each server still computes its
own roots, adding the modules it imported since and its cell's public paths.
"""

from dpkit.boundary.confine import _libc, readable_roots

_libc()
readable_roots()
