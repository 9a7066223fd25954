"""The parameters every split-training variant shares: precision validates, for all of them."""

import pytest

import dpkit
from dpkit.contract.plugins import get_registry

NAMES = ("hiddenecho", "hiddenecho_full", "hiddenecho_ldp")


@pytest.mark.parametrize("name", NAMES)
def test_precision_defaults_to_fp32_and_takes_bf16(name):
    registry = get_registry()
    assert registry.build("defense", name, {"eta": 1.0}).params.precision == "fp32"
    bf16 = registry.build("defense", name, {"eta": 1.0, "precision": "bf16"})
    assert bf16.params.precision == "bf16"
    assert "bfloat16 autocast" in type(bf16.params).model_fields["precision"].description


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value", ["fp16", "bfloat16", "BF16", "", 16, None])
def test_any_other_precision_is_refused_naming_the_allowed_ones(name, value):
    with pytest.raises(dpkit.base.errors.ParamsError,
                       match=rf"{name}\.params\.precision: Input should be 'fp32' or 'bf16'"):
        get_registry().build("defense", name, {"eta": 1.0, "precision": value})
