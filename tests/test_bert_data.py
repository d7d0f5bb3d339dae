"""BERT pretraining data: NSP pairs, MLM masking statistics, whole-word masking, batching."""

import random

import pytest
import torch

from ctxrep.batching import bucket_by_length
from ctxrep.models.bert import IGNORE_INDEX
from ctxrep.pretraining.bert_data import (
    PretrainingCollator,
    SpecialTokens,
    create_nsp_instances,
    mask_tokens,
)

# Deliberately not 0..4, so nothing can lean on BERT's usual ids.
VOCAB = {"[UNK]": 0, "[PAD]": 1, "[MASK]": 2, "[CLS]": 3, "[SEP]": 4}
SPECIAL = SpecialTokens.from_vocab(VOCAB)


def corpus(seed: int, n_docs: int = 40, sentences=(20, 40), tokens=(3, 15)):
    """Documents whose token ids count up through the whole corpus (each id occurs once), so
    any pair of token runs tells exactly where in which document it came from."""
    rng = random.Random(seed)
    next_id, documents = 10, []
    for _ in range(n_docs):
        document = []
        for _ in range(rng.randint(*sentences)):
            n = rng.randint(*tokens)
            document.append(list(range(next_id, next_id + n)))
            next_id += n
        documents.append(document)
    return documents


def segments(instance):
    """The A and B token lists of `[CLS] A [SEP] B [SEP]` (B empty without NSP)."""
    ids = instance.input_ids
    assert ids[0] == SPECIAL.cls and ids[-1] == SPECIAL.sep
    first_sep = ids.index(SPECIAL.sep)
    return ids[1:first_sep], ids[first_sep + 1 : -1]


def span_tokens(documents, span):
    return [t for sentence in documents[span.doc][span.start : span.end] for t in sentence]


def is_contiguous_run_of(tokens, source):
    """tokens is a non-empty contiguous slice of source."""
    if not tokens or tokens[0] not in source:
        return False
    start = source.index(tokens[0])
    return source[start : start + len(tokens)] == tokens


# ---------------------------------------------------------------------------------------------
# Next-sentence-prediction instances


def test_nsp_pairs_are_consecutive_or_from_another_document():
    documents = corpus(0, n_docs=60)
    rng = random.Random(1)
    instances = [i for _ in range(3) for i in create_nsp_instances(documents, 64, 0.1, rng, SPECIAL)]
    assert len(instances) > 1000
    random_fraction = sum(i.is_random_next for i in instances) / len(instances)
    # 50/50 coin, plus one-sentence chunks that can only be NotNext (as in the reference).
    assert 0.45 <= random_fraction <= 0.60, random_fraction

    for instance in instances:
        assert len(instance.input_ids) <= 64
        tokens_a, tokens_b = segments(instance)
        a, b = instance.segment_a, instance.segment_b
        assert instance.token_type_ids == [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        assert is_contiguous_run_of(tokens_a, span_tokens(documents, a))
        assert is_contiguous_run_of(tokens_b, span_tokens(documents, b))
        if instance.is_random_next:
            assert b.doc != a.doc
        else:
            assert b.doc == a.doc and b.start == a.end  # B is the sentences right after A
            assert tokens_a[-1] < tokens_b[0]  # and its tokens come after A's in the document


def test_nsp_uses_the_length_budget_and_short_sequences():
    documents = corpus(2)
    instances = create_nsp_instances(documents, 64, 0.0, random.Random(0), SPECIAL)
    lengths = [len(i.input_ids) for i in instances]
    assert max(lengths) == 64
    assert sum(n >= 48 for n in lengths) / len(lengths) > 0.6  # most chunks fill the budget
    short = create_nsp_instances(documents, 64, 1.0, random.Random(0), SPECIAL)
    assert sum(len(i.input_ids) for i in short) / len(short) < 0.8 * sum(lengths) / len(lengths)


def test_nsp_instances_are_deterministic_and_fresh_per_epoch():
    documents = corpus(3, n_docs=10)
    first = create_nsp_instances(documents, 48, 0.1, random.Random(5), SPECIAL)
    assert first == create_nsp_instances(documents, 48, 0.1, random.Random(5), SPECIAL)
    rng = random.Random(5)
    epoch_1 = create_nsp_instances(documents, 48, 0.1, rng, SPECIAL)
    epoch_2 = create_nsp_instances(documents, 48, 0.1, rng, SPECIAL)
    assert epoch_1 != epoch_2


def test_without_nsp_segments_tile_each_document_in_order():
    documents = corpus(4, n_docs=8)
    instances = create_nsp_instances(documents, 48, 0.0, random.Random(0), SPECIAL, nsp=False)
    by_doc = {}
    for instance in instances:
        assert instance.segment_b is None and not instance.is_random_next
        assert instance.input_ids.count(SPECIAL.sep) == 1 and set(instance.token_type_ids) == {0}
        assert len(instance.input_ids) <= 48
        by_doc.setdefault(instance.segment_a.doc, []).append(instance.segment_a)
    for doc, spans in by_doc.items():
        assert spans[0].start == 0 and spans[-1].end == len(documents[doc])
        assert all(prev.end == nxt.start for prev, nxt in zip(spans, spans[1:]))
    lengths = [len(i.input_ids) for i in instances]
    assert sum(n >= 40 for n in lengths) / len(lengths) > 0.6  # full-length, not sentence pairs


def test_nsp_needs_two_documents_and_room():
    with pytest.raises(ValueError, match="documents"):
        create_nsp_instances(corpus(0, n_docs=1), 64, 0.1, random.Random(0), SPECIAL)
    with pytest.raises(ValueError, match="max_seq_len"):
        create_nsp_instances(corpus(0), 4, 0.1, random.Random(0), SPECIAL)


def test_special_tokens_come_from_the_vocab():
    assert SPECIAL == SpecialTokens(pad=1, unk=0, cls=3, sep=4, mask=2)
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        SpecialTokens.from_vocab({k: v for k, v in VOCAB.items() if k != "[MASK]"})


# ---------------------------------------------------------------------------------------------
# Masking


def random_batch(seed: int, batch: int = 64, length: int = 48, vocab_size: int = 1000):
    """[CLS] A [SEP] B [SEP] [PAD]... rows of random lengths; returns ids and the special mask."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(10, vocab_size, (batch, length), generator=g)
    for row in range(batch):
        n = int(torch.randint(8, length + 1, (1,), generator=g))
        input_ids[row, 0] = SPECIAL.cls
        input_ids[row, n // 2] = input_ids[row, n - 1] = SPECIAL.sep
        input_ids[row, n:] = SPECIAL.pad
    special_mask = torch.isin(input_ids, torch.tensor(SPECIAL.ids))
    return input_ids, special_mask


def mask(input_ids, special_mask, seed, vocab_size=1000, **kwargs):
    g = torch.Generator().manual_seed(seed)
    return mask_tokens(input_ids, special_mask, vocab_size, SPECIAL.mask, 0.15, g, special_ids=SPECIAL.ids, **kwargs)


def test_masking_statistics_over_many_draws():
    chosen_total = maskable_total = as_mask = unchanged = replaced = 0
    for draw in range(30):
        input_ids, special_mask = random_batch(seed=draw)
        masked, labels = mask(input_ids, special_mask, seed=1000 + draw)
        chosen = labels != IGNORE_INDEX
        assert not (chosen & special_mask).any()  # never a special token or padding
        assert torch.equal(labels[chosen], input_ids[chosen])
        assert torch.equal(masked[~chosen], input_ids[~chosen])  # nothing else is touched
        n_maskable = (~special_mask).sum(1)
        expected = (n_maskable * 0.15).round().clamp(min=1)
        assert torch.equal(chosen.sum(1), expected.long())  # exactly 15% of each sequence
        chosen_total += chosen.sum().item()
        maskable_total += n_maskable.sum().item()
        as_mask += (masked[chosen] == SPECIAL.mask).sum().item()
        unchanged += (masked[chosen] == input_ids[chosen]).sum().item()
        replaced += ((masked[chosen] != SPECIAL.mask) & (masked[chosen] != input_ids[chosen])).sum().item()
    assert abs(chosen_total / maskable_total - 0.15) < 0.01
    assert abs(as_mask / chosen_total - 0.8) < 0.02
    assert abs(unchanged / chosen_total - 0.1) < 0.015
    assert abs(replaced / chosen_total - 0.1) < 0.015


def test_random_replacements_are_never_special_tokens():
    # A tiny vocabulary: if specials were eligible, about half of the replacements would be one.
    input_ids, special_mask = random_batch(seed=0, vocab_size=12)
    seen = torch.zeros(12, dtype=torch.bool)
    for draw in range(40):
        masked, labels = mask(input_ids, special_mask, seed=draw, vocab_size=12)
        chosen = labels != IGNORE_INDEX
        replaced = chosen & (masked != SPECIAL.mask) & (masked != input_ids)
        seen[masked[replaced]] = True
    assert not seen[list(SPECIAL.ids)].any()
    assert seen[10:].all()  # the whole non-special vocabulary is reachable


def test_masks_are_fresh_per_seed_and_reproducible():
    input_ids, special_mask = random_batch(seed=0)
    epoch_1 = mask(input_ids, special_mask, seed=1)
    epoch_2 = mask(input_ids, special_mask, seed=2)
    assert not torch.equal(epoch_1[1] != IGNORE_INDEX, epoch_2[1] != IGNORE_INDEX)
    again = mask(input_ids, special_mask, seed=1)
    assert torch.equal(epoch_1[0], again[0]) and torch.equal(epoch_1[1], again[1])


def word_ids_of(is_continuation, special_mask):
    """Word index per token (continuations join the word before them), -1 for specials."""
    word_ids = (~is_continuation & ~special_mask).long().cumsum(1)
    return torch.where(special_mask, -1, word_ids)


def test_whole_word_masking_never_splits_a_word():
    total_chosen = total_maskable = 0
    for draw in range(20):
        input_ids, special_mask = random_batch(seed=draw)
        g = torch.Generator().manual_seed(draw)
        # Words of 1-4 pieces: a token continues the previous word with probability 0.4.
        is_continuation = (torch.rand(input_ids.shape, generator=g) < 0.4) & ~special_mask
        is_continuation[:, 1] = False  # the first real token starts a word
        is_continuation &= ~torch.roll(special_mask, 1, dims=1)  # so does every token after [SEP]
        masked, labels = mask(input_ids, special_mask, seed=500 + draw, whole_word=True,
                              is_continuation=is_continuation)
        chosen = labels != IGNORE_INDEX
        assert not (chosen & special_mask).any()
        word_ids = word_ids_of(is_continuation, special_mask)
        budget = ((~special_mask).sum(1) * 0.15).round().clamp(min=1)
        for row in range(input_ids.size(0)):
            words = word_ids[row][chosen[row]].unique()
            whole = torch.isin(word_ids[row], words)
            assert torch.equal(whole, chosen[row]), "a word was partly masked"
            assert len(words) >= 1 and (chosen[row].sum() <= budget[row] or len(words) == 1)
        total_chosen += chosen.sum().item()
        total_maskable += (~special_mask).sum().item()
    assert 0.12 < total_chosen / total_maskable <= 0.15


def test_masking_validates_its_arguments():
    input_ids, special_mask = random_batch(seed=0)
    with pytest.raises(ValueError, match="mlm_prob"):
        mask_tokens(input_ids, special_mask, 1000, SPECIAL.mask, mlm_prob=0.0)
    with pytest.raises(ValueError, match="is_continuation"):
        mask_tokens(input_ids, special_mask, 1000, SPECIAL.mask, whole_word=True)


# ---------------------------------------------------------------------------------------------
# Batching


def test_collator_pads_to_the_batch_maximum_and_masks():
    documents = corpus(5, n_docs=6)
    instances = create_nsp_instances(documents, 40, 0.5, random.Random(0), SPECIAL)[:8]
    collate = PretrainingCollator(SPECIAL, vocab_size=10_000, pad_to_multiple_of=8)
    batch = collate(instances, list(range(len(instances))))
    longest = max(len(i.input_ids) for i in instances)
    assert batch["input_ids"].shape == (8, -(-longest // 8) * 8)
    for row, instance in enumerate(instances):
        n = len(instance.input_ids)
        assert batch["attention_mask"][row].tolist() == [1] * n + [0] * (batch["input_ids"].size(1) - n)
        assert batch["token_type_ids"][row, :n].tolist() == instance.token_type_ids
        assert (batch["input_ids"][row, n:] == SPECIAL.pad).all()
        original = torch.tensor(instance.input_ids)
        chosen = batch["labels"][row, :n] != IGNORE_INDEX
        assert torch.equal(batch["labels"][row, :n][chosen], original[chosen])
        assert (batch["labels"][row, n:] == IGNORE_INDEX).all()
    assert batch["next_sentence_label"].tolist() == [int(i.is_random_next) for i in instances]


def test_an_instance_is_masked_the_same_in_any_batch_or_rank():
    """Masks are drawn per instance: a global batch split across DDP ranks (or bucketed with
    other instances, or padded to another length) masks each instance as one process does."""
    documents = corpus(5, n_docs=6)
    instances = create_nsp_instances(documents, 40, 0.5, random.Random(0), SPECIAL)[:8]
    collate = PretrainingCollator(SPECIAL, vocab_size=10_000)
    row_seeds = [1000 + i for i in range(8)]
    whole = collate(instances, row_seeds)
    for rank in range(2):  # the loop's split: rank r takes rows r, r + world, ...
        part = collate(instances[rank::2], row_seeds[rank::2])
        for j, row in enumerate(range(rank, 8, 2)):
            n = len(instances[row].input_ids)
            assert torch.equal(part["input_ids"][j, :n], whole["input_ids"][row, :n])
            assert torch.equal(part["labels"][j, :n], whole["labels"][row, :n])
    assert not torch.equal(collate(instances, [s + 1 for s in row_seeds])["labels"],
                           whole["labels"])  # the seeds do choose the masks
    with pytest.raises(ValueError, match="one per instance"):
        collate(instances, row_seeds[:-1])


def test_collator_from_vocab_masks_whole_wordpiece_words():
    words = [f"w{i}" for i in range(40)] + [f"##p{i}" for i in range(40)]
    vocab = {**VOCAB, **{w: i + len(VOCAB) for i, w in enumerate(words)}}
    continuation = [vocab[w] for w in words if w.startswith("##")]
    starts = [vocab[w] for w in words if not w.startswith("##")]
    rng = random.Random(0)

    def sentence():  # words of one start piece and 0-3 continuation pieces
        return [t for _ in range(rng.randint(3, 8))
                for t in [rng.choice(starts)] + rng.choices(continuation, k=rng.randint(0, 3))]

    documents = [[sentence() for _ in range(10)] for _ in range(6)]
    instances = create_nsp_instances(documents, 64, 0.0, random.Random(1), SPECIAL)
    collate = PretrainingCollator.from_vocab(vocab, whole_word=True)
    for step in range(10):
        batch = collate(instances, [step * len(instances) + i for i in range(len(instances))])
        original = collate.pad(instances)["input_ids"]
        chosen = batch["labels"] != IGNORE_INDEX
        # A continuation piece is chosen exactly when the piece before it is, unless truncation
        # cut its word start off and left it right after [CLS] or [SEP].
        after_piece = torch.isin(original[:, 1:], torch.tensor(continuation)) & (original[:, :-1] >= len(VOCAB))
        assert torch.equal(chosen[:, 1:][after_piece], chosen[:, :-1][after_piece])
        assert after_piece.sum() > 100 and chosen.any()


def test_bucket_by_length_groups_similar_lengths_and_shuffles():
    rng = random.Random(0)
    lengths = [rng.randint(5, 128) for _ in range(1000)]
    batches = bucket_by_length(lengths, 16, random.Random(1), pool_batches=10)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert all(len(b) <= 16 for b in batches)
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches)
    shuffled = list(range(1000))
    random.Random(2).shuffle(shuffled)
    random_spread = sum(
        max(lengths[i] for i in shuffled[k : k + 16]) - min(lengths[i] for i in shuffled[k : k + 16])
        for k in range(0, 1000, 16)
    )
    assert spread < 0.25 * random_spread
    assert batches == bucket_by_length(lengths, 16, random.Random(1), pool_batches=10)
    again = bucket_by_length(lengths, 16, random.Random(3), pool_batches=10)
    assert [b[0] for b in again] != [b[0] for b in batches]  # a new epoch, a new order


def test_heldout_accuracy_at_mask_separates_copying_from_learning_from_context():
    """A model that copies its input at every chosen position scores ~10 % over all of them
    (the kept tokens) and 0 at [MASK] positions: only the at-mask number says it has learned
    nothing from context."""
    from types import SimpleNamespace

    from ctxrep.models.bert import BertConfig, BertForPreTraining, PreTrainingOutput
    from ctxrep.pretraining.bert_objective import BertObjective

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                        + [f"w{i}" for i in range(200)])}
    docs = [[[5 + (d * 7 + s * 3 + t) % 200 for t in range(12)] for s in range(6)] for d in range(8)]
    p = SimpleNamespace(mlm_prob=0.15, whole_word=False, max_seq_len=32, short_seq_prob=0.0,
                        nsp=False, seed=0, eval_instances=100, batch_size=8)
    config = BertConfig.named("tiny", vocab_size=len(vocab), max_position_embeddings=64,
                              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                              pre_layer_norm=False)

    class Copier(BertForPreTraining):
        def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None,
                    next_sentence_label=None):
            chosen = labels != IGNORE_INDEX
            hits = input_ids[chosen] == labels[chosen]
            zero = torch.tensor(0.0)
            return PreTrainingOutput(zero, zero, None, hits.sum(), chosen.sum(), None, None, hits)

    objective = BertObjective(Copier(config), docs, docs, vocab, p, torch.device("cpu"))
    metrics = objective.evaluate()
    assert metrics["val_mlm_acc_at_mask"] == 0.0
    assert 0.05 < metrics["val_mlm_acc"] < 0.2   # the kept tenth, and a random token now and then


def test_the_heldout_set_is_masked_at_15_percent_whatever_the_recipe_trains_with():
    from types import SimpleNamespace

    from ctxrep.models.bert import BertConfig, BertForPreTraining
    from ctxrep.pretraining.bert_objective import BertObjective

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                        + [f"w{i}" for i in range(200)])}
    docs = [[[5 + (d * 7 + s * 3 + t) % 200 for t in range(30)] for s in range(6)] for d in range(8)]
    config = BertConfig.named("tiny", vocab_size=len(vocab), max_position_embeddings=64,
                              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                              pre_layer_norm=False)
    shares = {}
    for rate in (0.15, 0.4):
        p = SimpleNamespace(mlm_prob=rate, whole_word=False, max_seq_len=64, short_seq_prob=0.0,
                            nsp=False, seed=0, eval_instances=100, batch_size=8)
        objective = BertObjective(BertForPreTraining(config), docs, docs, vocab, p,
                                  torch.device("cpu"))
        held = objective._collate(objective.heldout, list(range(len(objective.heldout))),
                                  objective.heldout_collate)
        train = objective.batch(objective.plan(0)[0], 0)
        shares[rate] = ((held["labels"] != IGNORE_INDEX).float().sum()
                        / held["attention_mask"].sum()).item(), \
            ((train["labels"] != IGNORE_INDEX).float().sum() / train["attention_mask"].sum()).item()
    assert shares[0.15][0] == shares[0.4][0]          # the same held-out positions
    assert shares[0.4][1] > 2 * shares[0.15][1]       # while training masks more
