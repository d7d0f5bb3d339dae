"""Task kinds (ctxrep.kinds): the per-kind facts every path asks, the registry and its interface."""

import dataclasses
import re
from pathlib import Path

import pytest
from datasets import ClassLabel, Dataset, Features, Sequence, Value

from ctxrep import kinds
from ctxrep.data.schemas import KINDS
from ctxrep.kinds import target_word
from ctxrep.kinds.span_qa import answer_words
from tests.conftest import cell_data


def test_every_canonical_kind_has_its_text_fields():
    assert list(kinds.KINDS) == list(KINDS)
    assert all(kinds.get(kind).NAME == kind and kinds.get(kind).FIELDS for kind in KINDS)


def test_label_set_sizes_per_kind():
    labels = Dataset.from_dict({"text": ["a", "b"], "label": [0, 2]},
                               Features({"text": Value("string"),
                                         "label": ClassLabel(names=["x", "y", "z"])}))
    tags = Dataset.from_dict({"tokens": [["a", "b"]], "tags": [[0, 1]]},
                             Features({"tokens": Sequence(Value("string")),
                                       "tags": Sequence(ClassLabel(names=list("ABCD")))}))
    scores = Dataset.from_dict({"text": ["a"], "text_pair": ["b"], "label": [3.5]})
    assert kinds.get("classification").n_labels(labels) == 3
    assert kinds.get("pair_classification").n_labels(labels) == 3
    assert kinds.get("tagging").n_labels(tags) == 4
    assert kinds.get("regression").n_labels(scores) == 0
    plain = Dataset.from_dict({"text": ["a"], "label": [1]})       # not the canonical schema
    with pytest.raises(ValueError, match="expected a ClassLabel column"):
        kinds.get("classification").n_labels(plain)


def test_target_word_is_the_word_covering_the_character():
    assert target_word("he sat on the bank.", 14) == 4       # "bank." starts at 14
    assert target_word("he sat on the bank.", 17) == 4       # inside it
    with pytest.raises(ValueError, match="covers character 2"):
        target_word("he sat", 2)                             # the space


def test_answer_words_of_a_span_with_punctuation():
    context = "The river Thames flows through London, England."
    start = context.index("London")
    first, last, spans = answer_words(context, {"text": ["London"], "answer_start": [start]})
    assert (first, last) == (5, 5) and len(spans) == 7       # the word is "London,"
    start = context.index("Thames")
    first, last, _ = answer_words(context, {"text": ["Thames flows"], "answer_start": [start]})
    assert (first, last) == (2, 3)


@pytest.mark.parametrize("kind, predictions, degenerate", [
    ("classification", [1, 1, 1], True), ("classification", [1, 0, 1], False),
    ("regression", [2.5, 2.5], True), ("regression", [2.5, 3.0], False),
    ("tagging", [[3, 3], [3]], True), ("tagging", [[3, 3], [1]], False),
    ("span_qa", ["a", "a"], False),                          # answers are texts, not labels
])
def test_degenerate_means_one_prediction_for_everything(kind, predictions, degenerate):
    assert kinds.get(kind).is_degenerate(predictions) is degenerate


def _labels(counts: dict) -> list:
    """A flat list with each label repeated counts[label] times."""
    return [label for label, n in counts.items() for _ in range(n)]


BALANCED = _labels({0: 500, 1: 500})
# CoNLL-2003-like gold: 83 % of the tokens 'O', 10 sentences of 100 tokens
CONLL_GOLD = [_labels({"O": 83, "B-PER": 5, "I-PER": 4, "B-LOC": 4, "B-ORG": 4})] * 10


def _tagger(o_share: int) -> list[list[str]]:
    """10 sentences of 100 tags, o_share of them 'O', the rest spread over entity tags."""
    rest = 100 - o_share
    return [_labels({"O": o_share, "B-PER": rest - rest // 2, "B-LOC": rest // 2})] * 10


@pytest.mark.parametrize("kind, predictions, references, degenerate", [
    # 98.1 % of the predictions one class (3 classes, balanced-ish gold): flagged
    ("classification", _labels({0: 981, 1: 10, 2: 9}), _labels({0: 340, 1: 330, 2: 330}), True),
    ("classification", _labels({0: 981, 1: 10, 2: 9}), None, True),         # no gold: 95 % floor
    # binary, 1.3 % positive predictions (F1 about 5): flagged
    ("pair_classification", _labels({0: 987, 1: 13}), BALANCED, True),
    ("word_in_context", _labels({0: 951, 1: 49}), BALANCED, True),          # 4.9 % positive
    # a balanced binary seed, and a skewed but learning one (90 / 10): not flagged
    ("classification", _labels({0: 480, 1: 520}), BALANCED, False),
    ("classification", _labels({0: 900, 1: 100}), BALANCED, False),
    # gold itself 97 % one class: 98 % of it is following the gold, 99.5 % is not
    ("classification", _labels({0: 980, 1: 20}), _labels({0: 970, 1: 30}), False),
    ("classification", _labels({0: 995, 1: 5}), _labels({0: 970, 1: 30}), True),
    # CoNLL-like tagging: a reasonable tagger (85 % 'O') is not flagged, one at 96 % 'O' is
    ("tagging", _tagger(85), CONLL_GOLD, False),
    ("tagging", _tagger(92), CONLL_GOLD, False),
    ("tagging", _tagger(96), CONLL_GOLD, True),
    ("tagging", [["O"] * 100] * 10, CONLL_GOLD, True),                      # one tag
    # regression: one value, a near-constant one, and a spread one
    ("regression", [3.0] * 100, [1.0 + i % 5 for i in range(100)], True),
    ("regression", [3.0 + 0.001 * (i % 5) for i in range(100)],
     [1.0 + i % 5 for i in range(100)], True),                              # std 0.1 % of gold
    ("regression", [3.0 + 0.5 * (i % 5) for i in range(100)],
     [1.0 + i % 5 for i in range(100)], False),
    ("span_qa", ["a"] * 10, [["a"]] * 10, False),
])
def test_degenerate_by_share_against_the_gold(kind, predictions, references, degenerate):
    assert kinds.get(kind).is_degenerate(predictions, references) is degenerate


# ---------------------------------------------------------------------------------------------
# The registry: every kind implements the whole interface; a new kind is one module


def test_every_registered_kind_implements_the_whole_interface():
    from ctxrep.config import ProbeParams
    from ctxrep.kinds.interface import ATTRIBUTES, TaskFormat, WordTask

    probe_fields = {f.name for f in dataclasses.fields(ProbeParams)}
    for name, kind in kinds.KINDS.items():
        missing = [a for a in ATTRIBUTES if not hasattr(kind, a)]
        assert not missing, f"{name} lacks {missing}"
        assert kind.NAME == name and kinds.get(name) is kind
        assert isinstance(kind.FIELDS, tuple) and all(isinstance(f, str) for f in kind.FIELDS)
        assert 1 <= len(kind.FIELDS) <= 2                    # feature_train batches one or two
        for function in ("n_labels", "references", "readable", "metric_inputs", "is_degenerate",
                         "baselines"):
            assert callable(getattr(kind, function)), (name, function)
        assert isinstance(kind.word_task(), WordTask)
        assert issubclass(kind.task_format, TaskFormat)
        # a probe is both a cap and the items, or neither
        assert (kind.PROBE_CAP is None) == (kind.probe_items is None), name
        assert kind.PROBE_CAP is None or (kind.PROBE_CAP in probe_fields
                                          and callable(kind.probe_items))
    with pytest.raises(ValueError, match="unknown task kind 'ranking'"):
        kinds.get("ranking")


def test_the_probed_tasks_are_kinds_with_a_probe():
    from ctxrep.data.tasks import get as task_spec
    from ctxrep.transfer.probe import PROBE_KINDS, PROBE_METRICS

    assert set(PROBE_KINDS) == set(PROBE_METRICS)
    for task, kind in PROBE_KINDS.items():
        assert task_spec(task).kind == kind and kinds.get(kind).probe_items is not None


# A kind the project does not have: one text → yes / no, with ONE logit (not a softmax over two),
# a sigmoid cross-entropy, and predictions saved as the label names. Written as its own module
# and registered; no other module of the project is touched.
BINARY_KIND = '''
"""Binary classification: one text -> yes / no, from one logit."""

import torch
import torch.nn.functional as F
from torch import nn

from ctxrep.analysis.baselines import majority
from ctxrep.kinds import classification
from ctxrep.kinds.interface import TaskFormat, WordTask
from ctxrep.kinds.shared import labels_degenerate
from ctxrep.models.feature_models import mlp, pool

NAME = "binary_classification"
FIELDS = ("text",)
PROBE_CAP = None
probe_items = None


def n_labels(dataset):
    return 1


def _names(dataset, ids):
    return [dataset.features["label"].names[i] for i in ids]


def references(dataset):
    return _names(dataset, dataset["label"])


def readable(dataset, predictions):
    return _names(dataset, predictions)


def metric_inputs(dataset, predictions):
    return list(predictions), list(dataset["label"])


def is_degenerate(predictions, references=None):
    return labels_degenerate(list(predictions), list(references or []))


def baselines(train_set, eval_set):
    return {"majority": majority(list(train_set["label"]), len(eval_set))}


class Logit(nn.Module):
    """logit = MLP([max_t h_t; mean_t h_t]); P(yes) = sigmoid(logit)."""

    def __init__(self, encoder, hidden, dropout):
        super().__init__()
        self.encoder, self.head = encoder, mlp(2 * encoder.out_dim, hidden, 1, dropout)

    def forward(self, batch):
        states = self.encoder(batch["layers"], batch["mask"])
        return self.head(pool(states, batch["mask"])).squeeze(-1)


def _bce(logits, labels):
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float())


class BinaryTask(WordTask):
    def make_head(self, encoder, n_labels, p):
        return Logit(encoder, p.encoder_hidden, p.dropout)

    def loss(self, output, batch):
        return _bce(output, batch["labels"])

    def predict(self, output, batch, targets):
        return (output > 0).long().tolist()


word_task = BinaryTask


class LogitHead(nn.Module):
    """logit = w . pooled + b."""

    def __init__(self, hidden):
        super().__init__()
        self.logit = nn.Linear(hidden, 1)

    def forward(self, encoded, batch):
        return self.logit(encoded.pooled_output).squeeze(-1)


class BinaryFormat(classification.ClassificationFormat):
    def make_head(self, hidden, dropout):
        return LogitHead(hidden)

    def loss(self, output, batch):
        return _bce(output, batch["label"])

    def predict(self, outputs, features, dataset):
        return [int(output > 0) for output in outputs]


task_format = BinaryFormat
'''


@pytest.fixture
def binary_kind(tmp_path, monkeypatch):
    import importlib.util

    path = tmp_path / "binary_classification.py"
    path.write_text(BINARY_KIND)
    spec = importlib.util.spec_from_file_location("binary_classification", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(kinds.KINDS, "binary_classification", module)  # the registry entry
    return module


def _yes_no():
    words = ["good", "great", "fine", "bad", "awful", "poor"]
    texts = [f"{words[i % 6]} film {i}" for i in range(12)]
    return Dataset.from_dict({"text": texts, "label": [int(i % 6 < 3) for i in range(12)]},
                             Features({"text": Value("string"),
                                       "label": ClassLabel(names=["no", "yes"])}))


def test_a_new_kind_is_one_module_and_a_registry_entry(binary_kind, tmp_path):
    import json

    import numpy as np

    from ctxrep.config.composition import defaults
    from ctxrep.kinds.interface import ATTRIBUTES
    from ctxrep.transfer.feature_train import build_model, run_feature_transfer
    from ctxrep.transfer.features import FeatureStore, FieldWriter, task_words
    from ctxrep.transfer.scoring import score

    assert all(hasattr(binary_kind, a) for a in ATTRIBUTES)
    data = _yes_no()
    kind = kinds.get("binary_classification")

    # scoring, readable output, degeneracy, baselines
    assert kind.references(data)[:4] == ["yes", "yes", "yes", "no"]
    assert score("binary_classification", "accuracy", data, list(data["label"])) == {"accuracy": 1.0}
    assert score("binary_classification", "accuracy", data, [1] * 12) == {"accuracy": 0.5}
    assert kind.is_degenerate(kind.readable(data, [1] * 12), kind.references(data))
    assert kind.baselines(data, data) == {"majority": [0] * 12}

    # the feature-based path: features that carry the label in the first word
    root = tmp_path / "features"
    root.mkdir()
    rng = np.random.default_rng(0)
    for split in ("train", "validation"):
        writer = FieldWriter(root, split, "text")
        for example in data:
            layers = rng.normal(0, 0.1, (3, len(task_words(example, "text")), 8))
            layers[0, 0, example["label"]] += 2.0   # elmo-token reads layer 0
            writer.add(layers)
        writer.close()
    (root / "meta.json").write_text(json.dumps({"n_layers": 3, "dim": 8}))
    p = defaults("transfer.elmo", encoder_hidden=16, epochs=30, batch_size=4, lr=0.01,
                 dropout=0.0)
    model = build_model("binary_classification", "elmo-token", 3, 8, kind.n_labels(data), p)
    assert model.head[-1].out_features == 1                      # one logit
    every = list(range(len(data)))
    cell = cell_data("binary_classification", "accuracy", {"train": data, "validation": data},
                     every, every, method="elmo-token")
    out = run_feature_transfer(cell, p, 0, tmp_path / "ck", FeatureStore(root))
    assert out.scores["accuracy"] == 1.0 and set(out.predictions) == {0, 1}


def test_a_new_kind_fine_tunes(binary_kind, tmp_path):
    import torch

    from ctxrep.config.composition import defaults
    from ctxrep.models.bert import BertConfig, BertForPreTraining
    from ctxrep.models.bert_hf import save_pretrained
    from ctxrep.text.wordpiece import save_wordpiece, train_wordpiece
    from ctxrep.transfer.finetune import run_finetune

    data = _yes_no()
    tokenizer = train_wordpiece(list(data["text"]), vocab_size=80, lowercase=True,
                                charset=set("".join(data["text"])))
    save_wordpiece(tokenizer, tmp_path / "tokenizer", lowercase=True)
    config = BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=16,
                        num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=32, hidden_dropout_prob=0.1,
                        attention_probs_dropout_prob=0.1, pre_layer_norm=False)
    torch.manual_seed(0)
    save_pretrained(BertForPreTraining(config), tmp_path / "bert",
                    tokenizer_dir=tmp_path / "tokenizer")
    p = defaults("transfer.bert-finetune", steps=6, eval_every=3, batch_size=4, lr=1e-3, warmup_fraction=0.1,
                 weight_decay=0.0, max_seq_len=16, doc_stride=8, dropout=0.0)
    every = list(range(len(data)))
    cell = cell_data("binary_classification", "accuracy", {"train": data, "validation": data},
                     every, every)
    out = run_finetune(cell, tmp_path / "bert", True, p, 0, tmp_path / "ck")
    assert set(out.scores) == {"accuracy"} and len(out.predictions) == 12
    assert set(out.predictions) <= {0, 1}
    assert out.trainable_params == sum(x.numel() for x in BertForPreTraining(config).bert
                                       .parameters()) + 16 + 1           # the one-logit head


# ---------------------------------------------------------------------------------------------
# No path compares kind names: each asks its kind

KIND_NAMES = ("classification", "pair_classification", "regression", "tagging",
              "word_in_context", "span_qa", "ud_pos", "wic")
COMPARISON = re.compile(
    r"\b(kind|task)\s*(==|!=)"                                  # kind == ..., spec.kind != ...
    r"|(?<!for )\bkind\s+(not\s+)?in\s"                         # kind in (...), not a loop
    r"|(==|!=)\s*[\"'](" + "|".join(KIND_NAMES) + r")[\"']")    # ... == "tagging"


def kind_comparisons(root: Path) -> list[str]:
    """Lines of the files below ``root`` (or of the file ``root``) that compare kind names."""
    paths = [root] if root.is_file() else sorted(root.rglob("*.py"))
    return [f"{path.relative_to(root.parent)}:{n}: {line.strip()}"
            for path in paths
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if COMPARISON.search(line)]


@pytest.mark.parametrize("line, found", [
    ('if kind == "tagging":', True), ("cap = a if task == 'ud_pos' else b", True),
    ("if task_spec.kind != kind:", True), ('elif kind in ("regression", "span_qa"):', True),
    ('if x == "span_qa":', True), ("for kind in kinds.KINDS:", False),
    ("task_kind = kinds.get(kind)", False), ("if task in saved:", False)])
def test_the_comparison_pattern(line, found):
    assert bool(COMPARISON.search(line)) is found


def test_no_path_compares_kind_names():
    """Nowhere outside ctxrep.kinds (the models know no task; elmo_import's ``kind`` is a Python
    type it checks a value against)."""
    src = Path(__file__).parents[1] / "src" / "ctxrep"
    folders = [p for p in src.iterdir() if p.is_dir() and p.name not in ("kinds", "models",
                                                                       "__pycache__")]
    found = [hit for folder in folders for hit in kind_comparisons(folder)]
    found += [hit for path in src.glob("*.py") for hit in kind_comparisons(path)]
    assert not found, "ask the kind (ctxrep.kinds.get(kind)) instead:\n" + "\n".join(found)


def test_the_pair_vector_is_numpy_s_formula_bit_for_bit():
    import numpy as np

    from ctxrep.kinds import pair_vector

    rng = np.random.default_rng(0)
    u, v = (rng.normal(0, 3, (5, 64)).astype(np.float16) for _ in range(2))
    old = np.concatenate([u.astype(np.float32), v.astype(np.float32),
                          np.abs(u.astype(np.float32) - v.astype(np.float32)),
                          u.astype(np.float32) * v.astype(np.float32)], axis=-1)
    new = pair_vector(u, v)
    assert new.dtype == np.float32 and new.tobytes() == old.tobytes()
