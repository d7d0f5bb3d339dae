"""BERT word features: first/mean sub-word pooling, padding invariance, truncation, FLOP count."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np
import pytest
import torch

from ctxrep.models.bert import BertConfig, BertForPreTraining, flops_per_token
from ctxrep.models.bert_hf import save_pretrained
from ctxrep.text.wordpiece import save_wordpiece, train_wordpiece
from ctxrep.transfer.extract import BertFeaturizer

TEXTS = ["the river bank flooded after the storm", "she sat on the bank of the river",
         "the bank raised its rates", "a storm over the river"]
RARE = "Blackburnshire"  # seen once: split into several pieces by a small vocabulary


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert")
    texts = TEXTS + [RARE]
    tokenizer = train_wordpiece(texts, vocab_size=100, lowercase=True, charset=set("".join(texts)))
    save_wordpiece(tokenizer, root / "tokenizer", lowercase=True)
    config = BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=32,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, pre_layer_norm=False)
    torch.manual_seed(0)
    save_pretrained(BertForPreTraining(config), root / "model", tokenizer_dir=root / "tokenizer")
    return root / "model"


def hidden_states(featurizer, words):
    """Every layer at every position of one unpadded sentence, and where each word's pieces are
    (found by tokenizing word by word, not through the fast tokenizer's word_ids)."""
    pieces = [len(featurizer.tokenizer.tokenize(w)) for w in words]
    spans, position = [], 1  # after [CLS]
    for n in pieces:
        spans.append(range(position, position + n))
        position += n
    enc = featurizer.tokenizer(words, is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        out = featurizer.model(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"],
                               output_hidden_states=True)
    return torch.stack(out.hidden_states, dim=1)[0], spans


@pytest.mark.parametrize("pooling", ["first", "mean"])
def test_word_vectors_pool_their_own_pieces(model_dir, pooling):
    featurizer = BertFeaturizer(model_dir, "cpu", pooling, max_seq_len=32)
    words = ["the", RARE, "bank", "flooded"]
    hidden, spans = hidden_states(featurizer, words)
    assert len(spans[1]) > 1, "fixture: the rare word must split into several pieces"
    (features,) = featurizer([words])
    assert features.shape == (3, len(words), 16)
    for j, span in enumerate(spans):
        expected = hidden[:, span[0]] if pooling == "first" else hidden[:, list(span)].mean(1)
        np.testing.assert_allclose(features[:, j], expected.numpy(), atol=1e-5)


def test_features_do_not_depend_on_batch_padding(model_dir):
    featurizer = BertFeaturizer(model_dir, "cpu", "mean", max_seq_len=32)
    short = ["a", "storm"]
    (alone,) = featurizer([short])
    batched = featurizer([TEXTS[1].split() + [RARE], short, []])
    np.testing.assert_allclose(batched[1], alone, atol=1e-5)
    assert batched[2].shape == (3, 0, 16)  # an empty text has no words


def test_words_past_the_window_are_zero_and_counted(model_dir):
    featurizer = BertFeaturizer(model_dir, "cpu", "first", max_seq_len=8)  # 6 pieces + 2 specials
    words = ["the", "river", RARE, "flooded", "after", "the", "storm"]
    ends = np.cumsum([len(featurizer.tokenizer.tokenize(w)) for w in words])
    kept = int((np.r_[0, ends[:-1]] < 6).sum())  # words whose first piece is inside the window
    assert 0 < kept < len(words)
    (features,) = featurizer([words])
    assert featurizer.truncated_words == len(words) - kept
    assert np.abs(features[:, :kept]).sum(axis=(0, 2)).min() > 0 and not features[:, kept:].any()


def test_forward_flops_are_counted_per_sequence(model_dir):
    featurizer = BertFeaturizer(model_dir, "cpu", "first", max_seq_len=32)
    batch = [["a", "storm"], TEXTS[0].split() + [RARE]]
    featurizer(batch)
    lengths = [len(featurizer.tokenizer(words, is_split_into_words=True)["input_ids"])
               for words in batch]  # [CLS] + pieces + [SEP], no padding
    assert featurizer.tokens == sum(lengths)
    config = featurizer.model.config
    expected = sum(n * flops_per_token(config, n, 0.0) / 3 for n in lengths)
    assert featurizer.flops == pytest.approx(expected)


def test_features_extracted_for_other_examples_are_refused(model_dir, tmp_path):
    """A changed subsample (another max_train_examples) must not train on stale features."""
    from datasets import Dataset

    from ctxrep.errors import InputError
    from ctxrep.transfer.extract import extract_task
    from ctxrep.transfer.features import FeatureStore

    featurizer = BertFeaturizer(model_dir, "cpu", "first", max_seq_len=32)
    rows = [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)]
    splits = {"train": Dataset.from_list(rows[:3]), "validation": Dataset.from_list(rows[3:])}
    extract_task(featurizer, splits, "classification", tmp_path, batch_size=2)
    store = FeatureStore(tmp_path)
    store.check_examples(splits, "classification")  # the same examples: accepted
    fewer = {**splits, "train": splits["train"].select(range(2))}
    with pytest.raises(InputError, match="split 'train' were extracted for other examples"):
        store.check_examples(fewer, "classification")
