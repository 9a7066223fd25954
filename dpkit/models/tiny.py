"""Tiny random encoder / causal LM with a small WordPiece tokenizer, built offline for tests."""

from __future__ import annotations

import string

import torch

from dpkit.models.split import SplitModel
from dpkit.models.stopwords import ENGLISH_STOP_WORDS

ENCODER_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CAUSAL_SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
EXTRA_WORDS = ("movie", "film", "good", "bad", "great", "food", "man", "woman", "eating",
               "bread", "piece", "story", "plot", "actor", "fresh", "rotten", "love", "hate")


def tiny_vocabulary(specials: tuple[str, ...]) -> list[str]:
    """Specials, characters, ``##``-continuations and a few hundred common English words."""
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    words = sorted(set(ENGLISH_STOP_WORDS) | set(EXTRA_WORDS))
    return list(dict.fromkeys([*specials, *chars, *("##" + c for c in chars), *words]))


def tiny_tokenizer(causal: bool):
    """A lowercasing WordPiece ``PreTrainedTokenizerFast`` over :func:`tiny_vocabulary`."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = CAUSAL_SPECIALS if causal else ENCODER_SPECIALS
    vocab = {tok: i for i, tok in enumerate(tiny_vocabulary(specials))}
    unk = specials[1]
    tok = Tokenizer(models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    if causal:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A </s> $B", special_tokens=[("<s>", vocab["<s>"]),
                                                                  ("</s>", vocab["</s>"])])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                       bos_token="<s>", eos_token="</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


def tiny_encoder(hidden_size: int = 32, num_layers: int = 2, num_heads: int = 2, seed: int = 0,
                 device: torch.device | str = "cpu", name: str = "tiny-bert") -> SplitModel:
    """A randomly initialised (seeded) tiny BERT encoder as a :class:`SplitModel` called ``name``."""
    from transformers import BertConfig, BertModel

    tokenizer = tiny_tokenizer(causal=False)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden_size,
                        num_hidden_layers=num_layers, num_attention_heads=num_heads,
                        intermediate_size=2 * hidden_size, max_position_embeddings=256,
                        pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertModel(config, add_pooling_layer=False)
    return SplitModel(name, model, tokenizer, causal=False, device=device,
                      stop_words=ENGLISH_STOP_WORDS)


def tiny_causal(hidden_size: int = 32, num_layers: int = 2, num_heads: int = 2, seed: int = 0,
                device: torch.device | str = "cpu", name: str = "tiny-llama") -> SplitModel:
    """A randomly initialised (seeded) tiny Llama causal LM as a :class:`SplitModel` called ``name``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer(causal=True)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden_size,
                         num_hidden_layers=num_layers, num_attention_heads=num_heads,
                         num_key_value_heads=num_heads, intermediate_size=2 * hidden_size,
                         max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return SplitModel(name, model, tokenizer, causal=True, device=device,
                      stop_words=ENGLISH_STOP_WORDS)
