"""Base classes for component parameters: strict :class:`Params`, and :class:`TrainingParams`,
the epochs and early stopping every trained part of a component declares the same way."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model


class Params(BaseModel):
    """Strict, frozen parameters: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class NoParams(Params):
    """Parameters of a component that takes none."""


EPOCHS_HELP = "training epochs (the most, with patience)"
PATIENCE_HELP = ("stop once the validation quantity has not improved for this many epochs and "
                 "keep the best epoch's parameters (dpkit's fit_epochs); None: train every epoch")


class TrainingParams(Params):
    """Epochs and early stopping of a trained part: ``epochs`` (the most) and ``patience``.

    Mix it into a component's params (``class MyParams(dpkit.TrainingParams)``) and pass
    ``patience=p.patience`` to :func:`dpkit.fit_epochs`. A component with several trained parts
    takes one prefixed copy per part, ``TrainingParams.part("student", epochs=20)`` (fields
    ``student_epochs`` and ``student_patience``). What the validation quantity is, and why
    stopping on it is covered by the ledger, is the component's to document (docs/plugins.md).
    """

    epochs: int = Field(2, ge=1, le=1000, description=EPOCHS_HELP)
    patience: int | None = Field(None, ge=1, description=PATIENCE_HELP)

    @classmethod
    def part(cls, prefix: str = "", *, epochs: int | None = 2, max_epochs: int | None = 1000,
             epochs_help: str = EPOCHS_HELP, patience_help: str = PATIENCE_HELP) -> type[Params]:
        """A mixin with ``{prefix}_epochs`` (default ``epochs``, at most ``max_epochs`` — None: no
        bound; None allowed as a value when ``epochs`` is None) and ``{prefix}_patience``
        (default None: train every epoch). Without a prefix the fields are ``epochs`` and
        ``patience``, with the defaults and help given."""
        name = f"{prefix}_" if prefix else ""
        epochs_type: Any = int if epochs is not None else (int | None)
        fields: dict[str, Any] = {
            f"{name}epochs": (epochs_type, Field(epochs, ge=1, le=max_epochs,
                                                 description=epochs_help)),
            f"{name}patience": (int | None, Field(None, ge=1, description=patience_help)),
        }
        title = "".join(w.capitalize() for w in prefix.split("_")) + "TrainingParams"
        model: type[Params] = create_model(title, __base__=Params, __doc__=(
            f"Epochs and early stopping of the {prefix or 'trained'} part (see TrainingParams)."),
            **fields)
        return model
