"""BERT's WordPiece tokenizer, trained with Hugging Face ``tokenizers`` and saved so that
``transformers.AutoTokenizer.from_pretrained(dir)`` loads it (``tokenizer.json`` + ``vocab.txt``).

Determinism: ``tokenizers`` (<= 0.23) creates the continuing-subword tokens (``##a``) lazily in
hash-map order, and their ids break ties between equally frequent merges, so two processes can
learn different vocabularies from the same text (huggingface/tokenizers#1794). We pre-register
every ``##c`` for the corpus's character set, in sorted order, so no id depends on iteration
order; then rebuild a plain WordPiece tokenizer whose only added tokens are BERT's five.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _empty_tokenizer(lowercase: bool, vocab: dict | None = None) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def train_wordpiece(texts: Iterable[str], vocab_size: int, lowercase: bool,
                    charset: Iterable[str]) -> Tokenizer:
    """Train on ``texts``; ``charset`` must hold every character that occurs in them."""
    tok = _empty_tokenizer(lowercase)
    chars = sorted({c for raw in charset for c in tok.normalizer.normalize_str(raw)
                    if not c.isspace()})
    continuing = [f"##{c}" for c in chars]
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size,
                                        special_tokens=SPECIAL_TOKENS + continuing,
                                        min_frequency=2, show_progress=False,
                                        continuing_subword_prefix="##")
    tok.train_from_iterator(texts, trainer=trainer)
    # The ##c entries count towards vocab_size, as the lazily created ones do in plain training.
    vocab = tok.get_vocab()
    ordered = sorted(vocab.items(), key=lambda kv: kv[1])
    tok = _empty_tokenizer(lowercase, vocab={w: i for i, (w, _) in enumerate(ordered)})
    tok.add_special_tokens(SPECIAL_TOKENS)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def save_wordpiece(tok: Tokenizer, out_dir: Path, lowercase: bool, model_max_length: int = 512):
    """``tokenizer.json``, ``vocab.txt`` (ids in order) and the ``transformers`` config files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    (out_dir / "vocab.txt").write_text("".join(f"{w}\n" for w, _ in vocab), encoding="utf-8")
    config = {"tokenizer_class": "BertTokenizerFast", "do_lower_case": lowercase,
              "model_max_length": model_max_length, "unk_token": "[UNK]", "sep_token": "[SEP]",
              "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
              "tokenize_chinese_chars": True, "strip_accents": None}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    special = {k: config[k] for k in ("unk_token", "sep_token", "pad_token", "cls_token",
                                      "mask_token")}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2, sort_keys=True))
