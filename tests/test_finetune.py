"""BERT fine-tuning: every head overfits a tiny task; windowing, first-sub-word tagging, init
control, determinism and errors. Fixtures (tokenizer, a random tiny BERT, data sets) are made here."""

import math
import os

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest
import torch
from datasets import Dataset

from ctxrep.config.composition import defaults
from ctxrep.data import schemas
from ctxrep.kinds import best_span
from ctxrep.kinds.span_qa import SpanQAFormat, context_windows
from ctxrep.kinds.tagging import TaggingFormat
from ctxrep.models.bert import BertConfig, BertForPreTraining
from ctxrep.models.bert_hf import save_pretrained
from ctxrep.text.wordpiece import save_wordpiece, train_wordpiece
from ctxrep.transfer.finetune import (
    FinetuneObjective,
    build_encoder,
    load_tokenizer,
    run_finetune,
    run_finetune_seed,
)
from tests.conftest import cell_data

# ---------------------------------------------------------------------------------------------
# Tiny task data (canonical schemas)

SENTIMENT = [
    ("the film was good", 1), ("a truly wonderful movie", 1), ("great acting and a fine story", 1),
    ("i loved every minute", 1), ("the music was lovely", 1), ("a fine and moving film", 1),
    ("the film was bad", 0), ("a truly awful movie", 0), ("boring acting and a dull story", 0),
    ("i hated every minute", 0), ("the music was terrible", 0), ("a dull and tedious film", 0),
]

# The same premise and the same hypothesis both occur with either label: the head needs both segments.
PAIRS = [
    ("a man plays the guitar", "a person plays music", 1),
    ("a man plays the guitar", "a woman cooks dinner", 0),
    ("a woman cooks dinner", "a person makes food", 1),
    ("a woman cooks dinner", "a person plays music", 0),
    ("two dogs run outside", "animals are running", 1),
    ("two dogs run outside", "a person makes food", 0),
    ("a child reads a book", "someone is reading", 1),
    ("a child reads a book", "animals are running", 0),
]

# A score per pair (the STS-B layout): how related the two texts are, 0–5.
SCORED = [(a, b, 4.5 if label else 0.5) for a, b, label in PAIRS] + [
    ("a man plays the guitar", "a man plays the guitar", 5.0),
    ("two dogs run outside", "a woman cooks dinner", 0.0),
    ("a child reads a book", "a person plays music", 1.5),
    ("a woman cooks dinner", "a woman makes dinner", 4.0),
]

TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
TAGGED = [
    ("Peter Blackburnshire visited new york", "B-PER I-PER O B-LOC I-LOC"),
    ("the u.s. embassy hired Xavierovich", "O B-LOC O O B-PER"),
    ("Mary lives in London", "B-PER O O B-LOC"),
    ("Zyxwvut flew to Blackburnshire", "B-PER O O B-LOC"),
    ("the man from new york", "O O O B-LOC I-LOC"),
    ("Peter Xavierovich met Mary", "B-PER I-PER O B-PER"),
    ("they left the u.s. today", "O O O B-LOC O"),
    ("London is far from Zyxwvut", "B-LOC O O O B-LOC"),
]

FILLER = ("the old bridge was built of stone and wood . many people walk across it every day . "
          "the town has a market a school and a small church near the river . ")
QA = [  # (context, question, answer); the first three contexts span several windows
    (FILLER + "the bank opened in 1907 .", "when did the bank open ?", "1907"),
    (FILLER + FILLER + "the mill was built by john smith .", "who built the mill ?", "john smith"),
    ("the bank opened in 1901 . " + FILLER, "when did the bank open ?", "1901"),
    ("the school opened in 1923 .", "when did the school open ?", "1923"),
    ("the church was built by anna lee .", "who built the church ?", "anna lee"),
    ("the market opened in 1885 .", "when did the market open ?", "1885"),
    ("the bridge was built by tom brown .", "who built the bridge ?", "tom brown"),
    ("the river was named by mary jones .", "who named the river ?", "mary jones"),
]

WIC = [  # (word, sentence1, sentence2, same sense?)
    ("bank", "he sat on the bank of the river", "the bank raised its rates", 0),
    ("bank", "the bank closed early", "she works at the bank downtown", 1),
    ("play", "the children play outside", "we saw a play at the theatre", 0),
    ("play", "they play chess", "dogs like to play", 1),
    ("light", "turn on the light", "the box is light", 0),
    ("light", "the light was bright", "the lamp gives light", 1),
    ("run", "i run every morning", "the play had a long run", 0),
    ("run", "they run fast", "horses run in the field", 1),
]

MAX_SEQ_LEN = 32


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run fastest on one thread, and do not stall when other work shares the CPUs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def classification_set() -> Dataset:
    texts, labels = zip(*SENTIMENT)
    return Dataset.from_dict({"text": list(texts), "label": list(labels)},
                             features=schemas.classification(["negative", "positive"]))


def pair_set() -> Dataset:
    texts, pairs, labels = zip(*PAIRS)
    return Dataset.from_dict({"text": list(texts), "text_pair": list(pairs), "label": list(labels)},
                             features=schemas.classification(["unrelated", "related"], pair=True))


def scored_set() -> Dataset:
    texts, pairs, scores = zip(*SCORED)
    return Dataset.from_dict({"text": list(texts), "text_pair": list(pairs),
                              "label": list(scores)}, features=schemas.regression())


def tagging_set() -> Dataset:
    tokens = [text.split() for text, _ in TAGGED]
    tags = [[TAGS.index(tag) for tag in tags.split()] for _, tags in TAGGED]
    return Dataset.from_dict({"tokens": tokens, "tags": tags}, features=schemas.tagging(TAGS))


def qa_set() -> Dataset:
    return Dataset.from_dict({
        "id": [f"q{i}" for i in range(len(QA))], "title": ["t"] * len(QA),
        "context": [c for c, _, _ in QA], "question": [q for _, q, _ in QA],
        "answers": [{"text": [a], "answer_start": [c.index(a)]} for c, _, a in QA],
    }, features=schemas.span_qa())


def wic_set() -> Dataset:
    rows = {k: [] for k in ("word", "sentence1", "start1", "end1", "sentence2", "start2", "end2", "label")}
    for word, s1, s2, label in WIC:
        for key, value in zip(rows, (word, s1, s1.index(word), s1.index(word) + len(word),
                                     s2, s2.index(word), s2.index(word) + len(word), label)):
            rows[key].append(value)
    return Dataset.from_dict(rows, features=schemas.word_in_context())


def all_texts() -> list[str]:
    return ([t for t, _ in SENTIMENT] + [t for p in PAIRS for t in p[:2]] + [t for t, _ in TAGGED]
            + [t for c, q, _ in QA for t in (c, q)] + [t for w in WIC for t in w[1:3]])


# ---------------------------------------------------------------------------------------------
# A tiny random BERT directory, as pretrain_bert writes it


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert")
    texts = all_texts()
    # A small vocabulary: words seen once (Blackburnshire, Xavierovich, years) split into pieces.
    tokenizer = train_wordpiece(texts, vocab_size=150, lowercase=True, charset=set("".join(texts)))
    save_wordpiece(tokenizer, root / "tokenizer", lowercase=True)
    config = BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, pre_layer_norm=False)
    torch.manual_seed(1234)  # not a fine-tuning seed: a scratch init must not equal these weights
    save_pretrained(BertForPreTraining(config), root / "model", tokenizer_dir=root / "tokenizer")
    return root / "model"


def params(**overrides):
    base = dict(steps=90, eval_every=3, batch_size=4, lr=3e-3, warmup_fraction=0.1,
                weight_decay=0.0, max_seq_len=MAX_SEQ_LEN, doc_stride=8, dropout=0.1)
    return defaults("transfer.bert-finetune", **{**base, **overrides})


def finetune(model_dir, tmp_path, kind, metric, dataset, seed=0, pretrained=True, epochs=30,
             patience=0, **overrides):
    """Train on `dataset` for `epochs` epochs (in steps, a dev evaluation after each) and score
    the same examples: the overfitting check (dev = train too, no early stopping, so the
    evaluation kept is the one that fits the training set best)."""
    every = list(range(len(dataset)))
    per_epoch = math.ceil(len(dataset) / overrides.get("batch_size", 4))
    p = params(**{"steps": epochs * per_epoch, "eval_every": per_epoch, **overrides})
    data = cell_data(kind, metric, {"train": dataset, "validation": dataset}, every, every,
                     patience)
    return run_finetune_seed(data, model_dir, pretrained, p, seed, tmp_path / f"ckpt-{seed}")


# ---------------------------------------------------------------------------------------------
# Every head overfits its fixture


def test_classification_overfits(model_dir, tmp_path):
    out = finetune(model_dir, tmp_path, "classification", "accuracy", classification_set())
    assert out.scores["accuracy"] == 1.0
    assert out.steps == 30 * 3 and out.train_examples == 12
    assert out.train_tokens > 0 and not (tmp_path / "ckpt-0").exists()
    assert out.lr == 3e-3 and out.lr_search is None
    assert out.dev_score == max(out.curve["dev"]) == out.curve["dev"][out.best_epoch - 1]


def test_pair_classification_overfits(model_dir, tmp_path):
    out = finetune(model_dir, tmp_path, "pair_classification", "accuracy", pair_set(), epochs=60)
    assert out.scores["accuracy"] == 1.0


def test_regression_overfits_the_pair_scores(model_dir, tmp_path):
    dataset = scored_set()
    out = finetune(model_dir, tmp_path, "regression", ("pearson_spearman",), dataset, epochs=60,
                   dropout=0.0)
    assert all(isinstance(p, float) for p in out.predictions)
    assert out.scores["pearson"] > 0.95
    # the mean training score as a constant would be off by 1.9 on average
    errors = [abs(p - g) for p, g in zip(out.predictions, dataset["label"])]
    assert sum(errors) / len(errors) < 0.75


def test_tagging_overfits_with_one_tag_per_word(model_dir, tmp_path):
    dataset = tagging_set()
    tokenizer = load_tokenizer(model_dir)
    pieces = {w: len(tokenizer.encode(w, add_special_tokens=False).ids) for t, _ in TAGGED for w in t.split()}
    assert pieces["Blackburnshire"] > 1 and pieces["u.s."] > 1, "fixture must have multi-piece words"

    features = TaggingFormat(tokenizer, params(), dataset).encode(dataset)
    # The label sits on each word's first sub-word only: after [CLS] and the pieces of the words before.
    for feature, (text, _), tags in zip(features, TAGGED, dataset["tags"]):
        word_lengths = [pieces[w] for w in text.split()]
        first_positions = [1 + sum(word_lengths[:w]) for w in range(len(word_lengths))]
        labelled = [(pos, tag) for pos, tag in enumerate(feature["labels"]) if tag != -100]
        assert labelled == list(zip(first_positions, tags))

    out = finetune(model_dir, tmp_path, "tagging", "token_accuracy", dataset, epochs=40)
    assert [len(p) for p in out.predictions] == [len(t) for t in dataset["tokens"]]
    assert out.predictions == list(dataset["tags"])
    assert out.scores["token_accuracy"] == 1.0


def test_span_qa_windows_put_the_answer_in_a_later_window(model_dir):
    dataset = qa_set()
    task = SpanQAFormat(load_tokenizer(model_dir), params(), dataset)
    features = task.encode(dataset)
    first_example = [f for f in features if f["example"] == 0]
    assert len(first_example) >= 3
    assert all(len(f["input_ids"]) <= MAX_SEQ_LEN for f in features)
    assert first_example[0]["start"] == first_example[0]["end"] == 0  # answer not in window 0: [CLS]
    holding = [k for k, f in enumerate(first_example) if f["start"] > 0]
    assert holding and holding[0] >= 1
    window = first_example[holding[0]]
    chars = window["char_offsets"]
    first, last = (window[k] - window["context_offset"] for k in ("start", "end"))
    assert QA[0][0][chars[first][0]:chars[last][1]] == "1907"


def test_context_windows_cover_with_overlap():
    assert context_windows(10, 4, 2) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert context_windows(3, 4, 2) == [(0, 3)]
    assert context_windows(10, 4, 9) == [(0, 4), (2, 6), (4, 8), (6, 10)]  # overlap capped at half


def test_best_span_respects_order_and_length():
    start = torch.tensor([-5.0, 5.0, 0.0, 0.0])
    end = torch.tensor([9.0, 0.0, 1.0, 3.0])  # (1, 0) would score 14, but ends before it starts
    assert best_span(start, end, max_len=30)[1:] == (1, 3)
    assert best_span(start, end, max_len=2)[1:] == (1, 2)


def test_span_qa_overfits(model_dir, tmp_path):
    # an epoch is one batch per 4 windows, and long contexts give several: 80 "epochs" of examples
    out = finetune(model_dir, tmp_path, "span_qa", "squad", qa_set(), epochs=80)
    assert out.predictions[0] == "1907"  # found in a later window of a long context
    assert out.scores["exact_match"] == 100.0
    assert out.train_features > len(QA)


def test_word_in_context_overfits(model_dir, tmp_path):
    out = finetune(model_dir, tmp_path, "word_in_context", "accuracy", wic_set())
    assert out.scores["accuracy"] == 1.0


# ---------------------------------------------------------------------------------------------
# Initialisation, determinism, errors


def test_scratch_encoder_differs_from_pretrained(model_dir):
    pretrained = build_encoder(model_dir, pretrained=True, seed=0).state_dict()
    scratch = build_encoder(model_dir, pretrained=False, seed=0).state_dict()
    again = build_encoder(model_dir, pretrained=False, seed=0).state_dict()
    assert pretrained.keys() == scratch.keys()
    name = "embeddings.word.weight"
    assert not torch.equal(pretrained[name], scratch[name])
    assert all(torch.equal(scratch[k], again[k]) for k in scratch)


def test_same_seed_same_result_other_seed_differs(model_dir, tmp_path):
    def short_run(seed):
        return finetune(model_dir, tmp_path, "classification", "accuracy", classification_set(),
                        seed=seed, epochs=2)

    first, second, other = short_run(0), short_run(0), short_run(1)
    assert first.train_loss == second.train_loss
    assert first.scores == second.scores and first.predictions == second.predictions
    assert other.train_loss != first.train_loss


def test_killed_run_resumes_to_the_same_result(model_dir, tmp_path, monkeypatch):
    def three_epochs():  # a dev evaluation each epoch (3 steps), a checkpoint every second one
        return finetune(model_dir, tmp_path, "classification", "accuracy", classification_set(),
                        epochs=3, checkpoint_evals=2)

    uninterrupted = three_epochs()

    real_batch = FinetuneObjective.batch

    def crash_at(at):
        def batch(self, indices, step):
            if step == at:
                raise KeyboardInterrupt("killed")
            return real_batch(self, indices, step)
        return batch

    monkeypatch.setattr(FinetuneObjective, "batch", crash_at(4))
    with pytest.raises(KeyboardInterrupt):
        three_epochs()
    assert not list((tmp_path / "ckpt-0").glob("step-*"))  # evaluated at step 3, no checkpoint
    monkeypatch.setattr(FinetuneObjective, "batch", crash_at(7))
    with pytest.raises(KeyboardInterrupt):
        three_epochs()
    assert (tmp_path / "ckpt-0" / "step-00000006").is_dir()  # saved after epoch 2 (3 steps/epoch)
    monkeypatch.setattr(FinetuneObjective, "batch", real_batch)
    resumed = three_epochs()
    assert resumed.resumed_from == 6 and uninterrupted.resumed_from == 0
    assert resumed.train_loss == uninterrupted.train_loss
    assert resumed.predictions == uninterrupted.predictions


def test_scratch_run_trains_from_different_weights(model_dir, tmp_path):
    finetuned = finetune(model_dir, tmp_path, "classification", "accuracy", classification_set(), epochs=1)
    scratch = finetune(model_dir, tmp_path, "classification", "accuracy", classification_set(),
                       epochs=1, pretrained=False)
    assert finetuned.train_loss != scratch.train_loss


def test_errors_are_clear(model_dir, tmp_path):
    data = classification_set()
    with pytest.raises(ValueError, match="unknown task kind 'ranking'"):
        finetune(model_dir, tmp_path, "ranking", "accuracy", data)
    with pytest.raises(ValueError, match="nothing to fine-tune on"):
        run_finetune(cell_data("classification", "accuracy",
                               {"train": data.select([]), "validation": data}, [], []),
                     model_dir, True, params(), 0, tmp_path / "ckpt")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "empty" / "config.json")):
        (tmp_path / "empty").mkdir()
        finetune(tmp_path / "empty", tmp_path, "classification", "accuracy", data)
    with pytest.raises(ValueError, match=r"missing columns \['text_pair'\]"):
        finetune(model_dir, tmp_path, "pair_classification", "accuracy", data)
    bare = tmp_path / "no_tokenizer"
    bare.mkdir()
    (bare / "config.json").write_text((model_dir / "config.json").read_text())
    with pytest.raises(FileNotFoundError, match="no tokenizer.json or vocab.txt"):
        finetune(bare, tmp_path, "classification", "accuracy", data)
    with pytest.raises(ValueError, match="max_seq_len"):
        finetune(model_dir, tmp_path, "classification", "accuracy", data, max_seq_len=128)



# ---------------------------------------------------------------------------------------------
# The budget in steps, dev evaluations, the learning-rate grid


def test_dev_is_scored_every_eval_every_steps_and_curves_say_when(model_dir, tmp_path):
    # 12 examples in batches of 4: 3 steps an epoch; 10 steps scored every 4 (and at the end)
    out = finetune(model_dir, tmp_path, "classification", "accuracy", classification_set(),
                   steps=10, eval_every=4)
    assert out.steps == 10
    assert out.curve["epoch"] == [round(4 / 3, 4), round(8 / 3, 4), round(10 / 3, 4)]
    assert len(out.curve["dev"]) == len(out.curve["train_loss"]) == 3


def test_patience_counts_evaluations_and_stops_before_the_budget(model_dir, tmp_path):
    # dev = train: the fit saturates at accuracy 1.0 and never beats it again
    out = finetune(model_dir, tmp_path, "classification", "accuracy", classification_set(),
                   steps=600, eval_every=3, patience=2)
    assert out.steps < 600
    assert len(out.curve["dev"]) == out.best_epoch + 2
    assert out.steps == 3 * len(out.curve["dev"])


def test_a_grid_of_rates_keeps_the_best_on_dev_and_matches_a_run_at_that_rate(model_dir, tmp_path):
    data = classification_set()
    every = list(range(len(data)))
    # dev = the first 4 examples only: the choice must come from dev, never the evaluation split
    dev = every[:4]
    grid = params(steps=6, eval_every=3, lr=[1e-5, 3e-3])
    cell = cell_data("classification", "accuracy", {"train": data, "validation": data}, every,
                     dev)
    out = run_finetune_seed(cell, model_dir, True, grid, 0, tmp_path / "grid")
    assert set(out.lr_search) == {"1e-05", "0.003"}
    best = max(grid.lr, key=lambda lr: out.lr_search[f"{lr:g}"])
    assert out.lr == best and out.dev_score == out.lr_search[f"{best:g}"]
    alone = run_finetune_seed(cell, model_dir, True, grid, 0, tmp_path / "alone", lr=best)
    assert alone.predictions == out.predictions and alone.train_loss == out.train_loss
    assert alone.lr_search is None
    assert not (tmp_path / "grid").exists()  # every trial's checkpoints removed


def test_a_single_rate_run_refuses_a_grid(model_dir, tmp_path):
    data = classification_set()
    every = list(range(len(data)))
    with pytest.raises(TypeError, match="is a grid"):
        run_finetune(cell_data("classification", "accuracy", {"train": data, "validation": data},
                               every, every),
                     model_dir, True, params(lr=[1e-3, 3e-3]), 0, tmp_path / "c")
