"""PrivacySettings: how a cell's ledger composes — the spec's ``privacy:`` block, as a component
receives it (``ctx.privacy``; ``planned_spends(privacy)``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PrivacySettings(BaseModel):
    """How the cell's ledger composes: δ, accountant, optional ε ceiling, neighbouring relation."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # a plug-in reads it, never changes it

    delta: float = Field(1e-5, gt=0, lt=1)
    accountant: Literal["rdp", "pld"] = "rdp"
    ceiling: float | None = Field(None, gt=0, description="refuse spends past this ε at delta")
    common_noise: bool = Field(False, description=(
        "true: every cell at one seed draws its release noise from the same stream (common random "
        "numbers: cells compared on paired draws). Two such cells released together can reveal "
        "the data (two η of one draw give x exactly), so each cell's ledger then records ε = ∞ "
        "for the spec's cells together; false (default): each cell draws its own noise"))
    neighboring: Literal["add_remove", "replace_one", "replace_special"] = Field(
        "add_remove", description="the neighbouring relation (ε, δ) is stated in")
