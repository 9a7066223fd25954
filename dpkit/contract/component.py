"""The generic component base: a registered name, a ``Params`` model, and ``__init__(params)``."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from dpkit.contract.params import NoParams


class Component:
    """Base of every mechanism, defense, attack, dataset and model class.

    Subclasses set ``name`` and a nested ``Params`` (a :class:`dpkit.Params`); the registry builds
    them as ``cls(cls.Params.model_validate(raw))``, and this ``__init__`` keeps the validated
    params on ``self.params``. Subclassing is optional: the registry checks the protocol, not the
    base class.
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams
    params: Any  # the validated instance of Params (typed per subclass where it helps)

    def __init__(self, params: Any) -> None:
        self.params = params
