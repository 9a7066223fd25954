"""Built-in generic tasks: ``privatize_text``, the defense a spec's ``mechanism:`` cells run (any token
mechanism on text, scored by a utility classifier).

Registered by reference with the capability ``runs_mechanisms`` (:class:`dpkit.RunsMechanisms`):
building the registry imports only :mod:`dpkit_tasks.params`.
"""

import dpkit


@dpkit.hookimpl
def dpkit_register_defenses(register):
    """Register the ``privatize_text`` defense."""
    register(f"{__name__}.privatize:PrivatizeText", name="privatize_text",
             params=f"{__name__}.params:PrivatizeTextParams", capabilities=("runs_mechanisms",))
