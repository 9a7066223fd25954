"""Write a tiny Llama as a GGUF file (F32, gpt2 byte-level BPE vocabulary) with the gguf package."""

from pathlib import Path

import numpy as np
import torch

SPECIALS = ["<unk>", "<s>", "</s>"]
MERGES = ["Ġ t", "h e", "Ġt he", "Ġ a", "a t", "Ġ c", "Ġc at"]


def byte_level_alphabet() -> list[str]:
    """The 256 printable stand-ins GPT-2's byte-level BPE uses for bytes."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + n))
            n += 1
    return chars


def vocabulary() -> list[str]:
    """Specials, the byte alphabet and the merged tokens."""
    merged = ["".join(m.split(" ")) for m in MERGES]
    return SPECIALS + byte_level_alphabet() + merged


def write_tiny_llama_gguf(path: Path, hidden: int = 32, layers: int = 2, heads: int = 4,
                          kv_heads: int = 2, seed: int = 0) -> torch.nn.Module:
    """Build a seeded tiny ``LlamaForCausalLM``, write it to ``path`` as GGUF, return the model."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM

    tokens = vocabulary()
    config = LlamaConfig(vocab_size=len(tokens), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads,
                         intermediate_size=2 * hidden, max_position_embeddings=64,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(64)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(2 * hidden)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS)))
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
             "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for i in range(layers):
        for hf, gg in names.items():
            t = sd[f"model.layers.{i}.{hf}.weight"]
            if gg in ("attn_q", "attn_k"):  # llama.cpp's rotary permutation, undone on load
                n = heads if gg == "attn_q" else kv_heads
                shape = t.shape
                t = t.reshape(n, 2, shape[0] // n // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)
            w.add_tensor(f"blk.{i}.{gg}.weight", np.ascontiguousarray(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model
