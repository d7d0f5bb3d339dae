"""Tiny randomly initialised Hugging Face checkpoints of three architectures, saved as
``save_pretrained`` writes them, each with a tokenizer of its own kind trained here (the Hub is
unreachable): RoBERTa and GPT-2 with byte-level BPE, DistilBERT with WordPiece."""

from __future__ import annotations

from pathlib import Path

TEXT = ["the cat sat on the mat", "a dog ran in the park", "unbelievable things happen",
        "the committee reconsidered its recommendations", "she sells sea shells"] * 20
ARCHITECTURES = ("roberta", "distilbert", "gpt2")


def _byte_level_bpe(special: list[str]):
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(TEXT, vocab_size=300, min_frequency=1, special_tokens=special)
    return tok


def save_tiny_checkpoint(architecture: str, folder: Path, seed: int = 0) -> Path:
    """``folder`` holding a 2-layer, 32-wide checkpoint of ``architecture`` and its tokenizer."""
    import torch
    import transformers as T
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    if architecture == "roberta":
        special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tok = _byte_level_bpe(special)
        tok._tokenizer.post_processor = processors.RobertaProcessing(
            ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
        tokenizer = T.RobertaTokenizerFast(tokenizer_object=tok._tokenizer, bos_token="<s>",
                                           eos_token="</s>", sep_token="</s>", cls_token="<s>",
                                           unk_token="<unk>", pad_token="<pad>",
                                           mask_token="<mask>")
        model = T.RobertaModel(T.RobertaConfig(
            vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64, max_position_embeddings=66,
            pad_token_id=1, bos_token_id=0, eos_token_id=2))
    elif architecture == "gpt2":
        tok = _byte_level_bpe(["<|endoftext|>"])
        tokenizer = T.GPT2TokenizerFast(tokenizer_object=tok._tokenizer,
                                        bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                        unk_token="<|endoftext|>")
        end = tok.token_to_id("<|endoftext|>")
        model = T.GPT2Model(T.GPT2Config(vocab_size=tok.get_vocab_size(), n_embd=32, n_layer=2,
                                         n_head=2, n_positions=64, bos_token_id=end,
                                         eos_token_id=end))
    elif architecture == "distilbert":
        special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
        wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        wordpiece.train_from_iterator(TEXT, trainers.WordPieceTrainer(vocab_size=120,
                                                                      special_tokens=special))
        wordpiece.post_processor = processors.BertProcessing(
            ("[SEP]", wordpiece.token_to_id("[SEP]")), ("[CLS]", wordpiece.token_to_id("[CLS]")))
        tokenizer = T.DistilBertTokenizerFast(tokenizer_object=wordpiece, unk_token="[UNK]",
                                              sep_token="[SEP]", pad_token="[PAD]",
                                              cls_token="[CLS]", mask_token="[MASK]")
        model = T.DistilBertModel(T.DistilBertConfig(
            vocab_size=wordpiece.get_vocab_size(), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
            max_position_embeddings=64))
    else:
        raise ValueError(architecture)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
