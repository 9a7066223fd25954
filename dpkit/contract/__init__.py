"""What a plug-in implements and receives — the one folder a plug-in author reads.

``kinds`` (the table of component kinds), ``hookspecs`` (the hooks), ``protocols`` (what each
kind provides, and the optional capabilities), ``component`` and ``params`` (the bases),
``context`` (:class:`RunContext`, what a defense gets for one cell), ``registry`` (name ->
component) and ``plugins`` (discovery through the ``dpkit`` entry-point group).
"""
