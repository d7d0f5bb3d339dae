"""A Hugging Face checkpoint folder (params ``hf.<name>``) as both transfer paths read it.

Any architecture ``transformers.AutoModel`` loads, encoder (BERT, RoBERTa, DistilBERT, ...) or
decoder (GPT-2, ...), with its own fast tokenizer; encoder-decoders are refused. This module
holds what the two paths share, and the fine-tuned network:

    checkpoint_record   provenance: the architecture and the sha256 of every file
    load_config         its config (an encoder-decoder refused with what to do instead)
    load_tokenizer      its fast tokenizer, set up for pre-split words and padding
    usable_positions    how many sub-words one sequence may hold
    is_left_to_right    whether position t sees only positions <= t (measured, not guessed)
    HFEncoder           the model as fine-tuning reads it: (B, T, H) states and a summary vector
    HFNetwork           the folder as fine-tuning builds it (``hf-<name>-finetune``)

Fine-tuning feeds it what the task kinds encode for BERT, with the checkpoint's own specials
(its tokenizer's post-processor: ``<s> text </s>`` for RoBERTa). A tokenizer that adds none
(GPT-2) gets GPT's fine-tuning format (Radford et al. 2018, §3.3): a start token before the
text, the end token after it and between the texts of a pair, ``<bos> text <eos>``. The summary
vector a sentence-level head reads is the model's own pooler output where it has one (BERT,
RoBERTa), else a new pooler over one position, tanh(W h_s + b): the first position (the start
special) for an encoder, the last real position for a left-to-right model, the only one that has
read the whole input (GPT's choice; ``ctxrep.models.bert`` pools a left-to-right BERT there too).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from ctxrep.io import sha256_file
from ctxrep.models.bert import BertOutput, Pooler, init_weights

# Architectures whose position ids start after the padding index (RoBERTa's convention): they
# hold max_position_embeddings - (pad_token_id + 1) positions.
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer")


def checkpoint_record(path: Path) -> dict:
    """What the checkpoint folder is: its architecture and the sha256 of every file in it."""
    config = json.loads((path / "config.json").read_text())
    files = sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts)
    return {"path": str(path), "model_type": config.get("model_type"),
            "architectures": config.get("architectures"),
            "files": {p.relative_to(path).as_posix(): sha256_file(p) for p in files}}


def load_config(path: Path):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    if config.is_encoder_decoder:
        raise ValueError(f"{path}: an encoder-decoder checkpoint ({config.model_type}); "
                         "save its encoder alone (e.g. T5EncoderModel) and name that folder")
    return config


def load_tokenizer(path: Path):
    """The checkpoint's fast tokenizer, padding on the right, with a padding token (the end or
    unknown token where it has none: GPT-2; the attention mask hides padding either way)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if not tokenizer.is_fast:
        raise ValueError(f"{path}: its tokenizer has no fast (Rust) version, which maps "
                         "sub-words back to words")
    if "ByteLevel" in json.dumps(
            json.loads(tokenizer.backend_tokenizer.to_str()).get("pre_tokenizer")):
        # Byte-level BPE (GPT-2, RoBERTa) takes pre-split words only with a space before
        # each, as they come in running text
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True,
                                                  add_prefix_space=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    tokenizer.padding_side = "right"  # a left-to-right model's real states stay first
    return tokenizer


def usable_positions(config) -> int | None:
    """Sub-words one sequence may hold: the model's positions (None if it names none)."""
    positions = next((p for key in ("max_position_embeddings", "n_positions")
                      if (p := getattr(config, key, None))), None)
    if positions and config.model_type in OFFSET_POSITIONS:
        positions -= (config.pad_token_id or 0) + 1
    return positions


@torch.no_grad()
def is_left_to_right(model: nn.Module, input_ids: list[int]) -> bool:
    """True when the state at position 0 does not change with the token at the last position:
    the model attends only leftwards (a decoder). Measured on ``model`` itself, in eval mode."""
    training = model.training
    model.eval()
    last = input_ids[-1]
    other = last + 1 if last + 1 < model.config.vocab_size else last - 1
    ids = torch.tensor([input_ids, [*input_ids[:-1], other]])
    first = model(input_ids=ids).last_hidden_state[:, 0].float()
    model.train(training)
    return torch.allclose(first[0], first[1], rtol=1e-5, atol=1e-6)


class HFEncoder(nn.Module):
    """A checkpoint's ``AutoModel`` as fine-tuning reads it (what :class:`ctxrep.models.bert.
    BertModel` returns): the last layer's states h (B, T, H), and a summary vector per sequence,
    the model's own pooler output, or tanh(W h_s + b) with s the first position (an encoder) or
    the last real one (a left-to-right model). Segment ids reach the model only if its
    tokenizer gives them (BERT's do; RoBERTa's, DistilBERT's and GPT-2's do not)."""

    def __init__(self, model: nn.Module, takes_token_types: bool, left_to_right: bool,
                 initializer_range: float):
        super().__init__()
        self.model = model
        self.takes_token_types, self.left_to_right = takes_token_types, left_to_right
        self.pooler = None  # the model's own, where it has one
        if getattr(model, "pooler", None) is None:  # BERT's pooler, initialised as BERT's is
            self.pooler = Pooler(model.config)
            init_weights(self.pooler, initializer_range)

    @property
    def has_pooler(self) -> bool:
        return self.pooler is None

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                attention_mask: torch.Tensor) -> BertOutput:
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.takes_token_types and token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        out = self.model(**inputs)
        states = out.last_hidden_state
        if self.pooler is None:
            return BertOutput(states, out.pooler_output, None)
        at = attention_mask.sum(1) - 1 if self.left_to_right else None  # None: position 0
        return BertOutput(states, self.pooler(states, at), None)


def with_specials(tokenizer):
    """``tokenizer``'s Rust tokenizer, padding and truncation off, whose encodings carry specials
    at both ends: its own post-processor's, or (where that adds none) ``<bos> $A <eos>`` and
    ``<bos> $A <eos> $B <eos>``, the second text in segment 1."""
    from tokenizers import processors

    backend = tokenizer.backend_tokenizer
    backend = type(backend).from_str(backend.to_str())  # a copy: the HF tokenizer keeps its own
    backend.no_padding()
    backend.no_truncation()
    if len(backend.encode("a").ids) == len(backend.encode("a", add_special_tokens=False).ids):
        start = tokenizer.bos_token or tokenizer.cls_token or tokenizer.eos_token
        end = tokenizer.eos_token or tokenizer.sep_token
        if start is None or end is None:
            raise ValueError(f"{tokenizer.name_or_path}: its tokenizer adds no special tokens and "
                             "names no start or end token to mark a sequence's ends with")
        template = processors.TemplateProcessing(
            single=f"{start} $A {end}", pair=f"{start} $A {end} $B:1 {end}:1",
            special_tokens=[(t, backend.token_to_id(t)) for t in dict.fromkeys((start, end))])
        own = backend.post_processor  # GPT-2's ByteLevel: it trims offsets of leading spaces
        backend.post_processor = (processors.Sequence([own, template]) if own is not None
                                  else template)
    return backend


class HFNetwork:
    """A checkpoint folder as fine-tuning builds it (:class:`ctxrep.transfer.finetune.Network`):
    its tokenizer with specials at both ends, its padding id, width and positions, and
    :class:`HFEncoder` from its weights or, the no-pretraining control, from its config."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.config = load_config(self.path)
        hf_tokenizer = load_tokenizer(self.path)
        self.tokenizer = with_specials(hf_tokenizer)
        self.pad_id = hf_tokenizer.pad_token_id
        self.takes_token_types = "token_type_ids" in hf_tokenizer.model_input_names
        self.hidden_size = self.config.hidden_size
        self.max_positions = usable_positions(self.config)
        self.initializer_range = getattr(self.config, "initializer_range", 0.02)
        self.weights = 0  # the encoder's, once built

    def encoder(self, pretrained: bool, seed: int) -> HFEncoder:
        from transformers import AutoModel

        torch.manual_seed(seed)
        model = (AutoModel.from_pretrained(self.path, local_files_only=True) if pretrained
                 else AutoModel.from_config(self.config)).float()
        self.weights = sum(p.numel() for p in model.parameters())
        probe = self.tokenizer.encode("a b c d").ids
        return HFEncoder(model, self.takes_token_types, is_left_to_right(model, probe),
                         self.initializer_range)

    def flops_per_token(self, length: int) -> float:
        """Training FLOPs per sub-word: 6 per weight (forward 2, backward 4); attention's own
        products and the head are left out."""
        return 6.0 * self.weights
