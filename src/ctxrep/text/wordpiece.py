"""BERT's WordPiece tokenizer, trained with Hugging Face ``tokenizers`` and saved so that
``transformers.AutoTokenizer.from_pretrained(dir)`` loads it (``tokenizer.json`` + ``vocab.txt``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece(texts: Iterable[str], vocab_size: int, lowercase: bool) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                        min_frequency=2, show_progress=False,
                                        continuing_subword_prefix="##")
    tok.train_from_iterator(texts, trainer=trainer)
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
