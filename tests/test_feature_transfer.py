"""Feature-based task models: every head overfits a tiny fixture; mixes behave as the methods say."""

import datasets
import numpy as np
import pytest
import torch

from ctxrep import kinds
from ctxrep.config.composition import defaults
from ctxrep.data import schemas
from ctxrep.models.word_vectors import WordVectors
from ctxrep.models.feature_models import WordFeatures
from ctxrep.transfer.feature_train import build_model, run_feature_transfer
from ctxrep.transfer.features import FeatureStore, FieldWriter, task_words
from tests.conftest import cell_data

N_LAYERS, DIM, VEC_DIM = 3, 8, 4


def word_vectors(words, vector=None, lowercase=True):
    """Word vectors for ``words``: ``vector(word)`` or small random ones."""
    rng = np.random.default_rng(1)
    rows = [vector(w) if vector else rng.normal(0, 0.1, VEC_DIM) for w in words]
    return WordVectors(list(words), [1] * len(words), np.asarray(rows, np.float32).reshape(
        len(words), -1), lowercase)


NO_VECTORS = word_vectors(["<none>"])  # every task word is out of vocabulary: x_k = 0


def write_store(root, kind, dataset, signal, validation=None):
    """Random features, plus ``signal(example, field, word_index)`` added to layer 1; the
    validation split is ``validation`` or, by default, the training split's exact bytes."""
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    import json

    splits = {"train": dataset} if validation is None else {"train": dataset,
                                                            "validation": validation}
    for field in kinds.get(kind).FIELDS:
        for split, examples in splits.items():
            w = FieldWriter(root, split, field)
            for ex in examples:
                words = task_words(ex, field)
                layers = rng.normal(0, 0.1, (N_LAYERS, len(words), DIM))
                for j in range(len(words)):
                    layers[1, j] += signal(ex, field, j)
                w.add(layers)
            w.close()
        if validation is None:
            for suffix in (".f16", ".offsets.npy"):
                (root / f"validation.{field}{suffix}").write_bytes(
                    (root / f"train.{field}{suffix}").read_bytes())
    (root / "meta.json").write_text(json.dumps({"n_layers": N_LAYERS, "dim": DIM}))
    return FeatureStore(root)


def one_hot(i):
    v = np.zeros(DIM)
    v[i % DIM] = 2.0
    return v


def params(**kw):
    return defaults("transfer.elmo", **{"encoder_hidden": 16, "epochs": 40, "batch_size": 8,
                                    "lr": 0.01, "dropout": 0.0, **kw})


def fit(tmp_path, kind, metric, dataset, signal, n_labels, method="elmo"):
    store = write_store(tmp_path / "f", kind, dataset, signal)
    every = list(range(len(dataset)))  # dev = train, no early stopping: the overfitting check
    assert kinds.get(kind).n_labels(dataset) == n_labels  # the head's size, read off the schema
    data = cell_data(kind, metric, {"train": dataset, "validation": dataset}, every, every,
                     method=method)
    out = run_feature_transfer(data, params(), 0, tmp_path / "ck", store, NO_VECTORS)
    return out


def test_sentence_classifier_overfits(tmp_path):
    ds = datasets.Dataset.from_dict({"text": [f"w{i} x y" for i in range(16)],
                                     "label": [i % 2 for i in range(16)]},
                                    features=schemas.classification(["a", "b"]))
    out = fit(tmp_path, "classification", "accuracy", ds,
              lambda ex, f, j: one_hot(ex["label"]) if j == 0 else 0, 2)
    assert out.scores["accuracy"] == 1.0


def test_pair_classifier_overfits(tmp_path):
    ds = datasets.Dataset.from_dict({"text": ["a b"] * 12, "text_pair": ["c d e"] * 12,
                                     "label": [i % 3 for i in range(12)],
                                     "relatedness": [1.0] * 12},
                                    features=schemas.classification(["x", "y", "z"], pair=True,
                                                                    extra={"relatedness": datasets.Value("float32")}))
    def signal(ex, field, j):
        return one_hot(ex["label"]) if field == "text_pair" else 0
    out = fit(tmp_path, "pair_classification", "accuracy", ds, signal, 3)
    assert out.scores["accuracy"] == 1.0


def test_pair_regressor_overfits_a_score_the_second_text_carries(tmp_path):
    """12 pairs whose score (1–5) is written in the second text's features only: the regressor
    must read the pair and output a float that tracks it (MSE head, Pearson/Spearman scoring)."""
    scores = [1.0 + (i * 5 % 12) / 3 for i in range(12)]
    ds = datasets.Dataset.from_dict({"text": ["a b"] * 12, "text_pair": ["c d e"] * 12,
                                     "label": scores}, features=schemas.regression())

    def signal(ex, field, j):
        return np.full(DIM, ex["label"] - 3.0) if field == "text_pair" else 0
    out = fit(tmp_path, "regression", ("pearson_spearman",), ds, signal, 0)
    assert all(isinstance(p, float) for p in out.predictions)
    assert out.scores["pearson"] > 0.99 and out.scores["spearman"] > 0.95
    assert np.abs(np.array(out.predictions) - scores).max() < 0.5


def test_tagger_overfits_one_tag_per_word(tmp_path):
    tags = [[(i + j) % 4 for j in range(3 + i % 3)] for i in range(12)]
    ds = datasets.Dataset.from_dict({"tokens": [[f"t{j}" for j in range(len(t))] for t in tags],
                                     "tags": tags}, features=schemas.tagging(["A", "B", "C", "D"]))
    out = fit(tmp_path, "tagging", "token_accuracy", ds, lambda ex, f, j: one_hot(ex["tags"][j]), 4)
    assert out.scores["token_accuracy"] == 1.0


def test_word_in_context_overfits(tmp_path):
    rows = {"word": [], "sentence1": [], "start1": [], "end1": [], "sentence2": [], "start2": [],
            "end2": [], "label": []}
    for i in range(12):
        rows["word"].append("bank")
        rows["label"].append(i % 2)
        for k in ("1", "2"):
            rows[f"sentence{k}"].append("we sat by the bank today")
            rows[f"start{k}"].append(14)
            rows[f"end{k}"].append(18)
    ds = datasets.Dataset.from_dict(rows, features=schemas.word_in_context())
    # only the target word (index 4) carries the label, and only in sentence2
    out = fit(tmp_path, "word_in_context", "accuracy", ds,
              lambda ex, f, j: one_hot(ex["label"]) if (j == 4 and f == "sentence2") else 0, 2)
    assert out.scores["accuracy"] == 1.0


def test_span_pointer_overfits(tmp_path):
    rows = {"id": [], "title": [], "context": [], "question": [], "answers": []}
    for i in range(10):
        words = [f"w{k}" for k in range(12)]
        start = i % 8
        context = " ".join(words)
        char = context.index(words[start])
        answer = " ".join(words[start:start + 2])
        rows["id"].append(str(i))
        rows["title"].append("t")
        rows["context"].append(context)
        rows["question"].append("which ?")
        rows["answers"].append({"text": [answer], "answer_start": [char]})
    ds = datasets.Dataset.from_dict(rows, features=schemas.span_qa())
    starts = {r: rows["context"][int(r)].index(rows["answers"][int(r)]["text"][0]) for r in rows["id"]}

    def signal(ex, field, j):
        if field != "context":
            return 0
        first = len(ex["context"][:starts[ex["id"]]].split())
        return one_hot(0) if j == first else one_hot(1) if j == first + 1 else 0
    out = fit(tmp_path, "span_qa", "squad", ds, signal, 0)
    assert out.scores["exact_match"] == 100.0


def test_methods_combine_layers_as_named():
    p = params()
    for method, trainable in (("elmo", True), ("elmo-avg", False)):
        model = build_model("classification", method, N_LAYERS, DIM, 2, p, VEC_DIM)
        mix = model.encoder.input_mix.mix
        assert mix.scalars.requires_grad is trainable
    token = build_model("classification", "elmo-token", N_LAYERS, DIM, 2, p).encoder
    assert token.input_mix.mix is None and token.rnn.input_size == DIM  # no x_k
    static = build_model("classification", "static", 0, 0, 2, p, VEC_DIM).encoder
    assert static.input_mix is None and static.rnn.input_size == VEC_DIM
    io = build_model("classification", "elmo-io", N_LAYERS, DIM, 2, p, VEC_DIM).encoder
    assert set(io.mix_weights()) == {"input", "output"}
    assert io.rnn.input_size == DIM + VEC_DIM  # [ELMo_k; x_k]
    with pytest.raises(ValueError, match="word vectors"):
        build_model("classification", "elmo", N_LAYERS, DIM, 2, p)  # elmo needs x_k


def tagger_output(method, layers, vectors, n_layers=N_LAYERS, dim=DIM, vector_dim=VEC_DIM):
    torch.manual_seed(0)
    model = build_model("tagging", method, n_layers, dim, 3, params(), vector_dim).eval()
    mask = torch.ones(2, 5, dtype=torch.bool)
    return model({"layers": WordFeatures(layers, vectors), "mask": mask})


def test_elmo_token_reads_layer_0_only():
    """elmo-token reads layer 0 only: changing layers 1.. changes nothing."""
    layers = torch.randn(2, N_LAYERS, 5, DIM)
    a = tagger_output("elmo-token", layers.clone(), None, vector_dim=0)
    layers[:, 1:] += 1.0
    assert torch.equal(a, tagger_output("elmo-token", layers, None, vector_dim=0))
    layers[:, 0] += 1.0
    assert not torch.equal(a, tagger_output("elmo-token", layers, None, vector_dim=0))


def test_word_vectors_replace_layer_0_as_x_k():
    """elmo-last reads [top layer; x_k]: layer 0 no longer enters, the word vectors do."""
    layers, vectors = torch.randn(2, N_LAYERS, 5, DIM), torch.randn(2, 5, VEC_DIM)
    a = tagger_output("elmo-last", layers.clone(), vectors.clone())
    layers[:, 0] += 1.0
    assert torch.equal(a, tagger_output("elmo-last", layers, vectors))
    for method in ("elmo", "elmo-last", "bert-feature", "elmo-random"):
        before = tagger_output(method, layers, vectors)
        assert not torch.equal(before, tagger_output(method, layers, vectors + 1.0)), method


def test_static_reads_the_word_vectors_alone():
    vectors = torch.randn(2, 5, VEC_DIM)
    a = tagger_output("static", None, vectors, 0, 0)
    assert not torch.equal(a, tagger_output("static", None, vectors + 1.0, 0, 0))


def test_a_static_cell_learns_from_the_word_vectors_it_is_given(tmp_path):
    """The static tagger reaches the lookup table with vectors that tell the words apart, and
    with every word out of vocabulary (x_k = 0 everywhere) learns only the majority tag."""
    train, evaluation = word_tagging_sets()
    splits = {"train": train, "validation": evaluation}
    every = list(range(len(train)))
    informative = word_vectors(VOCAB, lambda w: one_hot(int(w[1:])))
    scores = {}
    for name, vectors in (("informative", informative), ("oov", NO_VECTORS)):
        data = cell_data("tagging", "token_accuracy", splits, every, every, method="static")
        out = run_feature_transfer(data, params(epochs=8), 0, tmp_path / name, vectors=vectors)
        scores[name] = out.scores["token_accuracy"]
    tags = [t for s in evaluation["tags"] for t in s]
    majority = max(tags.count(t) for t in set(tags)) / len(tags)
    assert scores["informative"] == 1.0
    assert scores["oov"] <= majority + 1e-9


def test_the_objective_batches_the_task_words_vectors(tmp_path):
    """x_k of each real word is its vector (case-folded lookup), zero when out of vocabulary
    and at padding; the model features keep their own rows."""
    from ctxrep.transfer.feature_train import FeatureTaskObjective

    ds = datasets.Dataset.from_dict({"tokens": [["The", "bank", "zzz"], ["bank"]],
                                     "tags": [[0, 1, 0], [1]]}, features=schemas.tagging(["A", "B"]))
    vectors = word_vectors(["the", "bank"])
    store = write_store(tmp_path / "f", "tagging", ds, lambda ex, f, j: 0)
    model = build_model("tagging", "elmo", N_LAYERS, DIM, 2, params(), VEC_DIM)
    data = cell_data("tagging", "token_accuracy", {"train": ds, "validation": ds}, [0], [1],
                     method="elmo")
    objective = FeatureTaskObjective(model, data, params(), 0, store, vectors)
    batch = objective.batch([0, 1], 0)
    x = batch["layers"].vectors
    assert x.shape == (2, 3, VEC_DIM) and batch["layers"].layers.shape == (2, N_LAYERS, 3, DIM)
    assert torch.equal(x[0, 0], torch.from_numpy(vectors.vectors[0]))   # "The" → "the"
    assert torch.equal(x[0, 1], torch.from_numpy(vectors.vectors[1]))
    assert torch.equal(x[1, 0], torch.from_numpy(vectors.vectors[1]))
    assert not x[0, 2].any() and not x[1, 1:].any()                      # OOV, padding


# ---------------------------------------------------------------------------------------------
# Model selection on dev: convergence, and the evaluation split stays unseen


VOCAB = [f"w{t}" for t in range(8)]


def word_tagging_sets(n_train=80, n_eval=40):
    """Sentences over 8 word types; each type has one tag (type mod 3): a lookup table scores
    100 % on the evaluation sentences, so a converged tagger must too."""
    rng = np.random.default_rng(5)

    def sentences(n):
        words = [[f"w{t}" for t in rng.integers(0, 8, rng.integers(3, 9))] for _ in range(n)]
        return datasets.Dataset.from_dict(
            {"tokens": words, "tags": [[int(w[1:]) % 3 for w in s] for s in words]},
            features=schemas.tagging(["A", "B", "C"]))

    return sentences(n_train), sentences(n_eval)


def word_signal(ex, field, j):
    return one_hot(int(ex["tokens"][j][1:]))


def test_feature_tagger_converges_to_the_lookup_table(tmp_path):
    from ctxrep.analysis.baselines import lookup_tags
    from ctxrep.transfer.selection import train_dev_indices

    train, evaluation = word_tagging_sets()
    store = write_store(tmp_path / "f", "tagging", train, word_signal, evaluation)
    # a dev split large enough (20 sentences) that a perfect dev score means a converged tagger
    train_idx, dev_idx = train_dev_indices(len(train), 0.25)
    lookup = lookup_tags([train[i]["tokens"] for i in train_idx],
                         [train[i]["tags"] for i in train_idx], evaluation["tokens"])
    lookup_acc = np.mean([p == g for ps, gs in zip(lookup, evaluation["tags"])
                          for p, g in zip(ps, gs)])
    data = cell_data("tagging", "token_accuracy", {"train": train, "validation": evaluation},
                     train_idx, dev_idx, 3, method="elmo")
    out = run_feature_transfer(data, params(epochs=60, batch_size=8, lr=0.01), 0,
                               tmp_path / "ck", store, word_vectors(VOCAB))
    assert lookup_acc == 1.0
    assert out.scores["token_accuracy"] >= lookup_acc


def test_model_selection_never_reads_the_evaluation_split(tmp_path, monkeypatch):
    """The dev curve and the epoch kept are the same whatever the evaluation labels are, and
    the evaluation split is predicted exactly once, after training."""
    from ctxrep.transfer import feature_train
    from ctxrep.transfer.selection import train_dev_indices

    train, evaluation = word_tagging_sets()
    scrambled = evaluation.map(lambda ex: {"tags": [(t + 1) % 3 for t in ex["tags"]]})
    calls = []
    predict = feature_train.FeatureTaskObjective.predict

    def spy(self, split, rows=None):
        calls.append(split)
        return predict(self, split, rows)

    monkeypatch.setattr(feature_train.FeatureTaskObjective, "predict", spy)
    runs = []
    for i, eval_set in enumerate((evaluation, scrambled)):
        calls.clear()
        store = write_store(tmp_path / f"f{i}", "tagging", train, word_signal, eval_set)
        data = cell_data("tagging", "token_accuracy", {"train": train, "validation": eval_set},
                         *train_dev_indices(len(train), 0.2), 2, method="elmo")
        runs.append(run_feature_transfer(data, params(epochs=8), 0, tmp_path / f"ck{i}", store,
                                         NO_VECTORS))
        assert calls[-1] == "validation" and calls.count("validation") == 1
    assert runs[0].curve == runs[1].curve
    assert runs[0].best_epoch == runs[1].best_epoch
    assert runs[0].scores != runs[1].scores


def test_early_stopping_stops_after_patience_epochs_without_gain():
    import torch

    from ctxrep.transfer.selection import BestOnDev

    model = torch.nn.Linear(2, 2)
    selection = BestOnDev(model, "acc", patience=2)
    for score in (0.5, 0.7, 0.6, 0.7):
        assert not selection.should_stop
        selection.update({"acc": score})
    assert selection.should_stop and selection.best_epoch == 2
    with torch.no_grad():
        model.weight.fill_(9.0)
    selection.restore()
    assert model.weight.max().item() < 9.0
    # a score flat at its first epoch's (nothing learned yet) never stops early
    flat = BestOnDev(model, "f1", patience=2)
    for _ in range(6):
        flat.update({"f1": 0.0})
        assert not flat.should_stop
    flat.update({"f1": 0.1})
    flat.update({"f1": 0.05})
    assert not flat.should_stop
    flat.update({"f1": 0.05})
    assert flat.should_stop and flat.best_epoch == 7


def test_each_method_reads_its_model_features_and_the_word_vectors_as_the_paper_does():
    """What a cell trains on (and keys its checkpoints by): x_k for every feature-based method
    but the token-layer control; model features for every one but static."""
    from pathlib import Path

    from ctxrep import config
    from ctxrep.config import composition
    from ctxrep.transfer.feature_train import FeatureBased
    from ctxrep.transfer.finetune import FineTuning

    def input_paths(method, p=None):
        return FeatureBased(method, p).inputs("ud_pos")

    vectors = Path("data/models/static")
    assert input_paths("static") == [vectors]
    assert input_paths("elmo-token") == [Path("data/features/bilm/ud_pos")]
    assert input_paths("elmo") == [Path("data/features/bilm/ud_pos"), vectors]
    assert input_paths("bert-random") == [Path("data/features/bert-random/ud_pos"), vectors]
    for bert, folder in (("pretrain_bert", "data/models/bert"),
                         ("import_bert", "data/models/bert-published")):
        p = composition.defaults("transfer.bert-finetune", bert=bert)
        assert FineTuning("bert-finetune", p).inputs("ud_pos") == [Path(folder)]
    assert config.READS_WORD_VECTORS == set(config.FEATURE_METHODS) - {"elmo-token"}
    # each approach refuses the other's methods, naming the stage that runs them
    with pytest.raises(ValueError, match="stage finetune"):
        FeatureBased("bert-finetune", None)
    with pytest.raises(ValueError, match="stage transfer"):
        FineTuning("elmo", composition.defaults("transfer.bert-finetune"))


@pytest.mark.parametrize("available, asked, evaluated", [
    (("train", "validation", "test"), "validation", "validation"),
    (("train", "validation", "test"), "test", "test"),
    (("train", "validation"), "test", "validation"),   # eval_split=test on a task without one
    (("train", "test"), "validation", "test"),         # a task published as train/test
])
def test_a_task_is_evaluated_on_the_split_asked_for_else_validation_else_test(available, asked,
                                                                              evaluated):
    from ctxrep.transfer.data import evaluated_split
    assert evaluated_split("t", available, asked) == evaluated


def test_a_task_with_no_split_to_evaluate_is_refused_by_name():
    from ctxrep.data.readers import DataError
    from ctxrep.transfer.data import evaluated_split
    with pytest.raises(DataError, match=r"task t: no split to evaluate on: it has \['dev', 'train'\]"):
        evaluated_split("t", ("train", "dev"), "validation")


def test_a_task_not_fetched_yet_is_refused_naming_its_manifest(tmp_path, monkeypatch):
    from ctxrep.data.readers import DataError
    from ctxrep.transfer.data import load_splits
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=r"data/raw/tasks/sst2/MANIFEST.json: missing; run "
                                        r"fetch_tasks@sst2 first"):
        load_splits("sst2")


def test_subsampling_draws_from_every_part_of_a_label_ordered_split_and_keeps_file_order():
    """docs/adding-a-task.md: `max_train_examples` is a seeded draw, not the first rows, so a
    task published one file per label (all of label 0, then all of label 1) keeps both labels;
    the rows drawn stay in file order, and the draw is the same every run."""
    from ctxrep.transfer.data import subsample

    rows = datasets.Dataset.from_dict({"label": [0] * 500 + [1] * 500, "row": list(range(1000))})
    drawn = subsample(rows, 100)
    assert len(drawn) == 100 and drawn["row"] == sorted(drawn["row"])
    assert 30 < sum(drawn["label"]) < 70  # both labels, near their share
    assert drawn["row"] == subsample(rows, 100)["row"]
    assert subsample(rows, 0) is rows and subsample(rows, 1000) is rows
