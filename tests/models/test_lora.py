"""with_lora: peft adapters on a tiny model, without peft's deprecation warning leaking out."""

import warnings

import peft

from dpkit.models import tiny_causal, with_lora


def test_adapters_are_trainable_and_no_deprecation_warning_escapes():
    model = tiny_causal(32, 2, 2, 0).server
    config = peft.LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrapped = with_lora(model, config)
    trainable = [n for n, p in wrapped.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
