"""Model sources and the split client/server wrapper (see ``docs/data.md``)."""

from dpkit.contract.plugins import load_model
from dpkit.models.loaders import (is_causal_config, load_hf_split, load_npy_space,
                                  load_word2vec_text)
from dpkit.models.lora import with_lora
from dpkit.models.split import ServerOutput, SplitModel, TokenBatch, last_token_pool, mean_pool
from dpkit.models.stopwords import ENGLISH_STOP_WORDS
from dpkit.models.tiny import tiny_causal, tiny_encoder, tiny_tokenizer

__all__ = [
    "ENGLISH_STOP_WORDS",
    "ServerOutput",
    "SplitModel",
    "TokenBatch",
    "is_causal_config",
    "last_token_pool",
    "load_hf_split",
    "load_model",
    "load_npy_space",
    "load_word2vec_text",
    "mean_pool",
    "tiny_causal",
    "tiny_encoder",
    "tiny_tokenizer",
    "with_lora",
]
