"""What a plug-in implements and receives, behind the published API (``dpkit``).

``kinds`` (the table of component kinds and the capabilities declared at registration),
``hookspecs`` (the hooks), ``protocols`` (what each kind provides, and the optional
capabilities), ``component`` and ``params`` (the bases), ``privacy`` (``PrivacySettings``),
``context`` (:class:`RunContext`, what a defense gets for one cell), ``registry`` (name ->
component, imported lazily), ``tasks`` (the defense a mechanism cell runs, by capability) and
``plugins`` (discovery through the ``dpkit`` entry-point group). Plug-ins import these names from
``dpkit``, never from here.
"""
