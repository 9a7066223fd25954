"""The frozen lower blocks: evaluation mode during training, outputs replayed across epochs."""

import pytest
import torch

from dpkit.models import tiny_encoder
from dpkit.contract.plugins import get_registry
from dpkit.testing.boundary import server_of
from dpkit_hiddenecho.body import attach_lora, block_outputs, private_copy, transformer_blocks
from dpkit_hiddenecho.frozen_blocks import FrozenBlockCache, StateStore, example_keys

from .test_defense import HE, SMALL, run, toy_dataset

TWO_EPOCHS = {**HE, "epochs": 2, "lora_layers": 1}


def lora_model(layers=3, adapted=1):
    model = private_copy(tiny_encoder(32, layers, 2, 0))
    attach_lora(model, 2, 4.0, 0.0, None, adapted)
    return model


def noisy_batch(n=5, width=7, seed=0):
    gen = torch.Generator().manual_seed(seed)
    noisy = torch.randn(n, width, 32, generator=gen)
    lengths = torch.randint(2, width + 1, (n,), generator=gen)
    lengths[0] = width
    mask = torch.arange(width) < lengths.unsqueeze(1)
    return noisy, mask


def test_frozen_part_is_deterministic_in_a_training_body():
    model = lora_model()
    model.server.train(True)
    cache = FrozenBlockCache(model.server, transformer_blocks(model.server, 3), 2)
    cache.evaluation_mode()
    noisy, mask = noisy_batch()
    with torch.no_grad():
        first, second = (block_outputs(model, noisy, mask.long()) for _ in range(2))
    assert torch.equal(first[1], second[1])  # embeddings' dropout and blocks 0-1 are off
    assert not torch.equal(first[2], second[2])  # the adapted block still drops out


def test_replayed_states_equal_computed_ones_at_every_real_position():
    model = lora_model()
    model.server.eval()
    cache = FrozenBlockCache(model.server, transformer_blocks(model.server, 3), 2)
    cache.evaluation_mode()
    noisy, mask = noisy_batch()
    with torch.no_grad():
        reference = block_outputs(model, noisy, mask.long())
        with cache.batch(noisy, mask):
            first = block_outputs(model, noisy, mask.long())
        # the same examples in another order and trimmed to a shorter padding width
        order = torch.tensor([3, 1, 4, 2])
        width = int(mask[order].sum(1).max())
        with cache.batch(noisy[order, :width], mask[order, :width]):
            again = block_outputs(model, noisy[order, :width], mask[order, :width].long())
    assert cache.misses == 5 and cache.hits == 4
    for layer in range(3):
        real = mask.unsqueeze(-1)
        torch.testing.assert_close(first[layer] * real, reference[layer] * real)
        shuffled = mask[order, :width].unsqueeze(-1)
        torch.testing.assert_close(again[layer] * shuffled,
                                   reference[layer][order, :width] * shuffled,
                                   atol=1e-5, rtol=1e-5)


def test_a_batch_with_a_new_example_runs_the_blocks_and_keeps_old_entries():
    model = lora_model()
    cache = FrozenBlockCache(model.server, transformer_blocks(model.server, 3), 2)
    cache.evaluation_mode()
    noisy, mask = noisy_batch()
    with torch.no_grad():
        with cache.batch(noisy[:3], mask[:3]):
            block_outputs(model, noisy[:3], mask[:3].long())
        with cache.batch(noisy[1:], mask[1:]):  # two seen, two new: computed, not replayed
            block_outputs(model, noisy[1:], mask[1:].long())
    assert cache.hits == 0 and cache.misses == 7
    assert len(cache.store) == 5 and all(len(v) == 2 for v in cache.store.values())


def test_blocks_in_training_mode_are_never_replayed():
    model = lora_model()
    model.server.train(True)
    cache = FrozenBlockCache(model.server, transformer_blocks(model.server, 3), 2)
    noisy, mask = noisy_batch()
    with torch.no_grad():
        for _ in range(2):
            with cache.batch(noisy, mask):
                block_outputs(model, noisy, mask.long())
    assert cache.hits == 0


def test_keys_ignore_padding_and_tell_examples_apart():
    noisy, mask = noisy_batch()
    wider = torch.cat([noisy, torch.randn(5, 3, 32)], 1)
    wide_mask = torch.cat([mask, torch.zeros(5, 3, dtype=torch.bool)], 1)
    assert example_keys(noisy, mask) == example_keys(wider, wide_mask)
    assert len(set(example_keys(noisy, mask))) == 5


def test_an_adapted_block_cannot_be_cached():
    model = lora_model(adapted=2)
    with pytest.raises(ValueError, match="trainable parameters"):
        FrozenBlockCache(model.server, transformer_blocks(model.server, 3), 2)


@pytest.fixture(scope="module")
def setup():
    return get_registry(), toy_dataset(), tiny_encoder(32, 3, 2, 0)


def test_reuse_changes_no_result_of_a_defense_run(setup):
    torch.manual_seed(0)
    reused, reused_ctx = run(setup, "hiddenecho", TWO_EPOCHS)
    torch.manual_seed(0)
    computed, computed_ctx = run(setup, "hiddenecho", {**TWO_EPOCHS, "reuse_frozen": False})
    assert server_of(reused_ctx).frozen.hits > 0 and server_of(computed_ctx).frozen.hits == 0
    torch.testing.assert_close(reused.training_curves[0]["train_loss"],
                               computed.training_curves[0]["train_loss"], atol=1e-5, rtol=1e-5)
    assert reused.metrics["auc"] == pytest.approx(computed.metrics["auc"], abs=1e-6)


def test_frozen_blocks_drop_out_only_when_asked(setup):
    modes = []
    ldp = {**SMALL, "lora_layers": 1}
    servers = [server_of(run(setup, "hiddenecho_ldp", params)[1])
               for params in ({**ldp, "frozen_dropout": True}, ldp)]
    assert servers[0].frozen is None and servers[1].frozen is not None
    for server in servers:
        server.set_mode(True)
        blocks = transformer_blocks(server.model.server, 3)
        modes.append([b.training for b in blocks])
    assert modes == [[True, True, True], [False, False, True]]


def test_cells_never_share_stored_states(setup):
    """One store per server, that is per cell: a second cell with the same model and the same
    noisy embeddings computes its frozen blocks again (a server never holds another cell's
    states) and gives the same results."""
    results, servers = [], []
    for _ in range(2):
        torch.manual_seed(0)  # module initialisation and dropout draw from the global generator
        result, ctx = run(setup, "hiddenecho_ldp", {**SMALL, "lora_layers": 1, "epochs": 2})
        results.append(result)
        servers.append(server_of(ctx))
    first, second = servers
    assert first.frozen.store is not second.frozen.store
    assert (second.frozen.misses, second.frozen.hits) == (first.frozen.misses, first.frozen.hits)
    assert second.frozen.misses > 0 and second.frozen.hits > 0  # computed in epoch 1, replayed
    assert results[0].training_curves == results[1].training_curves


def test_a_full_store_stops_growing_and_the_blocks_run_again():
    model = lora_model()
    model.server.eval()
    cache = FrozenBlockCache(model.server, transformer_blocks(model.server, 3), 2, max_bytes=1)
    noisy, mask = noisy_batch()
    with torch.no_grad():
        for _ in range(2):
            with cache.batch(noisy, mask):
                block_outputs(model, noisy, mask.long())
    assert len(cache.store) == 1 and cache.hits == 0  # one example stored, then full


def test_keys_see_where_the_real_positions_are():
    noisy, mask = noisy_batch(n=1, width=4)
    shifted = torch.cat([torch.zeros(1, 1, 32), noisy], 1)
    shifted_mask = torch.cat([torch.zeros(1, 1, dtype=torch.bool), mask], 1)
    assert example_keys(noisy, mask) != example_keys(shifted, shifted_mask)


def bf16_forward(model, noisy, mask, cache=None):
    """The body's block outputs under bfloat16 autocast (through ``cache`` when given)."""
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        if cache is None:
            return block_outputs(model, noisy, mask.long())
        with cache.batch(noisy, mask):
            return block_outputs(model, noisy, mask.long())


def test_a_cache_refuses_a_store_or_a_forward_of_another_precision():
    noisy, mask = noisy_batch()
    model = lora_model()
    blocks = transformer_blocks(model.server, 3)
    with pytest.raises(ValueError, match="bf16' was given a store of 'fp32' states"):
        FrozenBlockCache(model.server, blocks, 2, store=StateStore("fp32"), precision="bf16")
    fp32 = FrozenBlockCache(model.server, blocks, 2)
    with pytest.raises(RuntimeError, match="holds fp32 states but the body runs at bf16"):
        bf16_forward(model, noisy, mask, fp32)
    other = lora_model()
    bf16 = FrozenBlockCache(other.server, transformer_blocks(other.server, 3), 2,
                            precision="bf16")
    with pytest.raises(RuntimeError, match="holds bf16 states but the body runs at fp32"):
        with torch.no_grad(), bf16.batch(noisy, mask):
            block_outputs(other, noisy, mask.long())
    assert not fp32.store and not bf16.store  # nothing was stored by the refused forwards


def test_bf16_states_are_replayed_as_computed_and_differ_from_fp32_ones():
    noisy, mask = noisy_batch()
    model = lora_model()
    model.server.eval()
    with torch.no_grad():
        fp32 = block_outputs(model, noisy, mask.long())
    reference = bf16_forward(model, noisy, mask)
    cache = FrozenBlockCache(model.server, transformer_blocks(model.server, 3), 2,
                             store=StateStore("bf16"), precision="bf16")
    computed, replayed = (bf16_forward(model, noisy, mask, cache) for _ in range(2))
    assert cache.misses == 5 and cache.hits == 5
    real = mask.unsqueeze(-1)
    for layer in range(3):
        assert torch.equal(computed[layer] * real, reference[layer] * real)
        assert torch.equal(replayed[layer] * real, reference[layer] * real)
        assert replayed[layer].dtype == reference[layer].dtype
    # far enough from fp32 that replaying one precision's states in the other would show
    assert not torch.allclose(reference[2] * real, fp32[2] * real, atol=1e-5, rtol=1e-5)


def test_fp32_and_bf16_cells_keep_their_own_stored_states(setup):
    results, made = [], []
    for precision, reuse in (("fp32", True), ("bf16", True), ("bf16", False)):
        torch.manual_seed(0)
        result, ctx = run(setup, "hiddenecho_ldp", {**SMALL, "lora_layers": 1, "epochs": 2,
                                                    "reuse_frozen": reuse, "precision": precision})
        results.append(result)
        made.append(server_of(ctx))
    fp32, bf16, _ = made
    assert (fp32.frozen.store.precision, bf16.frozen.store.precision) == ("fp32", "bf16")
    assert bf16.frozen.store is not fp32.frozen.store
    assert len(bf16.frozen.store) == len(fp32.frozen.store) > 0
    # the bf16 cell computed its own states in epoch 1 and replayed them from epoch 2 on, as
    # the fp32 cell did
    assert (bf16.frozen.misses, bf16.frozen.hits) == (fp32.frozen.misses, fp32.frozen.hits)
    assert bf16.frozen.hits > 0
    # replayed bf16 states give the bf16 cell that computes them every epoch, up to rounding
    torch.testing.assert_close(results[1].training_curves[0]["train_loss"],
                               results[2].training_curves[0]["train_loss"],
                               atol=1e-4, rtol=0)
