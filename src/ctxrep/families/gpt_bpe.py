"""gpt_bpe: GPT as the seeds describe it, a left-to-right Transformer decoder with its own
byte-level BPE. The network and objective are the ``gpt`` family's (BERT's post-LN network with
causal attention, as GPT-1's decoder is post-LN, trained to predict each next token on the same
corpus, segments and budget: conf ``pretrain_gpt_bpe``); the tokenizer is GPT-2's kind
(Radford et al. 2019): BPE over bytes, so no text is ever out of vocabulary, learned here from
the corpus's training sentences with as many entries as BERT's WordPiece
(``tokenize.wordpiece_vocab_size``) and BERT's five special tokens, so segments, batches and
task heads are BERT's. Beside ``gpt`` it separates the tokenizer from the objective in BERT's
Table 5 (``bert-feature`` − ``gpt_bpe-feature``).
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxrep.families import Family

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # BERT's: its collators' ids


def byte_level_bpe(corpus, out_dir: Path) -> None:
    """Learn the BPE from ``corpus``'s training sentences (a
    :class:`~ctxrep.data.tokenized.TokenizedCorpus`), lowercased where its WordPiece is, and write
    it to ``out_dir`` as a folder ``transformers.AutoTokenizer`` loads: ``tokenizer.json``
    (words split into bytes after a space, [CLS] … [SEP] around a sequence, offsets trimmed to
    the word) and the config files that describe it."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers

    made = corpus.meta["params"]
    tokenizer = Tokenizer(models.BPE())
    if made["lowercase"]:
        tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    trainer = trainers.BpeTrainer(vocab_size=made["wordpiece_vocab_size"], min_frequency=2,
                                  special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    sentences = (s for doc in corpus.documents("train", columns=["sentences"])
                 for s in doc["sentences"])
    tokenizer.train_from_iterator(sentences, trainer=trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=True),
        processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                      special_tokens=[("[CLS]", cls), ("[SEP]", sep)])])
    tokenizer.decoder = decoders.ByteLevel()
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    special = dict(zip(("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"),
                       SPECIAL_TOKENS))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "add_prefix_space": True,
         "model_input_names": ["input_ids", "token_type_ids", "attention_mask"], **special},
        indent=2) + "\n")
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


FAMILY = Family("gpt_bpe", "left-to-right LM, byte-level BPE",
                headlines=("val_lm_ppl", "val_lm_acc", "train_tokens"), left_to_right=True,
                tokenizer=byte_level_bpe)
