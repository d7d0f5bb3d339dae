"""Baselines, per-example statistics, bootstrap CIs and claim verdicts, on hand-computed cases."""

import datasets
import numpy as np
import pytest

from ctxrep import kinds
from ctxrep.analysis import baselines as B
from ctxrep.analysis.bootstrap import (Interval, bootstrap_mean, contrast, example_stats,
                                       metric_value, paired_difference)
from ctxrep.analysis.claims import Claim, judge_all, unjudged, verdict
from ctxrep.data import schemas
from ctxrep.metrics import compute
from ctxrep.transfer.selection import nested_subset

# ---------------------------------------------------------------------------------------------
# Baselines


def test_majority_breaks_ties_toward_the_first_label():
    assert B.majority([2, 1, 2, 1, 0], 3) == [1, 1, 1]   # 1 and 2 tie (two each): 1 wins
    assert B.majority([0, 2, 2], 2) == [2, 2]


def test_lookup_tags_each_word_with_its_most_frequent_tag():
    train_tokens = [["the", "dog", "runs"], ["the", "runs", "runs"], ["a", "dog"]]
    train_tags = [[0, 1, 2], [0, 1, 2], [0, 1]]
    # "runs": tag 2 twice, tag 1 once → 2; "dog": 1; unseen "cat" → the most frequent tag
    # overall (0: 3 times, 1: 3 times, 2: 2 times → tie → 0).
    assert B.lookup_tags(train_tokens, train_tags, [["the", "cat", "runs", "dog"]]) == [[0, 0, 2, 1]]
    assert B.majority_tags(train_tags, [["x", "y"]]) == [[0, 0]]


def test_tfidf_lr_separates_a_vocabulary_split_and_reads_pairs_side_by_side():
    train = ["good fine great", "great good", "bad awful poor", "poor bad"] * 3
    labels = [1, 1, 0, 0] * 3
    assert B.tfidf_lr(train, labels, ["good great", "awful poor"]) == [1, 0]
    # pairs: the label depends on which side a word is on, so only side-by-side features see it
    pairs = [("red", "blue"), ("blue", "red")] * 6
    assert B.tfidf_lr(pairs, [1, 0] * 6, [("red", "blue"), ("blue", "red")]) == [1, 0]
    assert B.tfidf_lr(["a", "b"], [1, 1], ["c"]) == [1]   # one class: majority, no fit


def test_overlap_window_picks_the_span_next_to_the_question_words():
    context = "Paris is the capital of France . Berlin is in Germany ."
    # question words near "Paris": capital, france; the span avoids the question's own words
    assert B.overlap_window("What is the capital of France ?", context) == "Paris"


def test_each_kind_gives_its_baselines():
    tagging = datasets.Dataset.from_dict({"tokens": [["a", "b"], ["b"]], "tags": [[0, 1], [1]]},
                                         features=schemas.tagging(["X", "Y"]))
    assert kinds.get("tagging").baselines(tagging, tagging) == {"majority": [[1, 1], [1]],
                                                                       "lookup": [[0, 1], [1]]}
    sentences = datasets.Dataset.from_dict({"text": ["good", "bad", "good", "bad"],
                                            "label": [1, 0, 1, 0]},
                                           features=schemas.classification(["n", "p"]))
    out = kinds.get("classification").baselines(sentences, sentences)
    assert out["majority"] == [0, 0, 0, 0] and out["tfidf-lr"] == [1, 0, 1, 0]


def test_regression_baselines_mean_and_tfidf_ridge():
    """The mean baseline predicts the training mean (correlation 0 by the metric's definition);
    TF-IDF + ridge scores held-out pairs by their word overlap, so it correlates with gold
    scores that follow the overlap."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]

    def pair(shared):  # two 6-word texts sharing `shared` words
        a = list(rng.choice(words, 6, replace=False))
        b = a[:shared] + [f"u{rng.integers(1000)}" for _ in range(6 - shared)]
        return " ".join(a), " ".join(b), float(shared)
    rows = [pair(int(rng.integers(0, 7))) for _ in range(160)]
    ds = datasets.Dataset.from_dict({"text": [r[0] for r in rows], "text_pair": [r[1] for r in rows],
                                     "label": [r[2] for r in rows]}, features=schemas.regression())
    train, test = ds.select(range(120)), ds.select(range(120, 160))
    out = kinds.get("regression").baselines(train, test)
    assert set(out) == {"mean", "tfidf-ridge"}
    assert out["mean"] == [pytest.approx(np.mean(train["label"]))] * 40
    assert compute("pearson_spearman", out["mean"], test["label"])["pearson"] == 0.0
    assert compute("pearson_spearman", out["tfidf-ridge"], test["label"])["pearson"] > 0.7


# ---------------------------------------------------------------------------------------------
# Per-example statistics sum to the metric modules' values


def test_pearson_statistics_reproduce_the_metric_module_and_a_constant_is_zero():
    rng = np.random.default_rng(4)
    gold = rng.uniform(0, 5, 300)
    pred = gold + rng.normal(0, 2, 300) + 100.0  # far from 0: the shift keeps sums small
    stats = example_stats("pearson", pred.tolist(), gold.tolist())
    assert metric_value("pearson", stats) == pytest.approx(
        compute("pearson_spearman", pred.tolist(), gold.tolist())["pearson"], abs=1e-9)
    assert metric_value("pearson", example_stats("pearson", [3.3] * 50, gold[:50].tolist())) == 0.0


def test_bootstrap_ci_of_pearson_matches_the_fisher_interval():
    """For bivariate normal data the 95 % CI of r is tanh(atanh(r) ± 1.96/√(n−3))."""
    rng = np.random.default_rng(5)
    n = 2000
    x = rng.normal(size=n)
    y = 0.6 * x + 0.8 * rng.normal(size=n)
    ci = bootstrap_mean("pearson", [example_stats("pearson", x.tolist(), y.tolist())],
                        n_resamples=2000)
    r = np.corrcoef(x, y)[0, 1]
    low, high = np.tanh(np.arctanh(r) + np.array([-1.96, 1.96]) / np.sqrt(n - 3))
    assert ci.estimate == pytest.approx(r)
    assert ci.low == pytest.approx(low, abs=0.15 * (high - low))
    assert ci.high == pytest.approx(high, abs=0.15 * (high - low))


def test_statistics_reproduce_the_metric_modules():
    rng = np.random.default_rng(0)
    preds, refs = rng.integers(0, 3, 200).tolist(), rng.integers(0, 3, 200).tolist()
    assert metric_value("accuracy", example_stats("accuracy", preds, refs)) == pytest.approx(
        compute("accuracy", predictions=preds, references=refs)["accuracy"])
    assert metric_value("macro_f1", example_stats("macro_f1", preds, refs)) == pytest.approx(
        compute("macro_f1", predictions=preds, references=refs)["macro_f1"])
    binary_p, binary_r = rng.integers(0, 2, 200).tolist(), rng.integers(0, 2, 200).tolist()
    for statistic, module in (("binary_f1", "binary_f1"), ("matthews", "matthews_correlation")):
        assert metric_value(statistic, example_stats(statistic, binary_p, binary_r)) == \
            pytest.approx(compute(module, predictions=binary_p, references=binary_r)[module])
    assert metric_value("matthews", example_stats("matthews", [1] * 5, [0, 1, 0, 1, 1])) == 0.0
    tags = ["O", "B-PER", "I-PER", "B-LOC"]
    ref_tags = [[tags[t] for t in rng.integers(0, 4, 6)] for _ in range(50)]
    pred_tags = [[tags[t] for t in rng.integers(0, 4, 6)] for _ in range(50)]
    assert metric_value("entity_f1", example_stats("entity_f1", pred_tags, ref_tags)) == \
        pytest.approx(compute("seqeval_f1", predictions=pred_tags, references=ref_tags)["f1"])
    assert metric_value("token_accuracy", example_stats("token_accuracy", pred_tags, ref_tags)) \
        == pytest.approx(compute("token_accuracy", predictions=pred_tags,
                                 references=ref_tags)["token_accuracy"])


def test_squad_statistics_take_the_best_gold_answer():
    stats = example_stats("squad_f1", ["the cat", "dog"], [["a cat", "cat"], ["bird"]])
    assert stats[:, 0].tolist() == [1.0, 0.0]  # "the cat" normalises to "cat"
    assert metric_value("squad_em", example_stats("squad_em", ["Cat!"], [["cat"]])) == 1.0


# ---------------------------------------------------------------------------------------------
# Bootstrap CIs


def test_bootstrap_ci_of_a_proportion_matches_the_normal_approximation():
    """n Bernoulli(p) outcomes: the 95 % CI is p̂ ± 1.96·sqrt(p̂(1−p̂)/n) to within a few %."""
    n, p = 4000, 0.7
    correct = (np.random.default_rng(1).random(n) < p).astype(float)[:, None]
    ci = bootstrap_mean("accuracy", [correct], n_resamples=2000)
    p_hat = correct.mean()
    half = 1.96 * np.sqrt(p_hat * (1 - p_hat) / n)
    assert ci.estimate == pytest.approx(p_hat)
    assert ci.low == pytest.approx(p_hat - half, abs=0.15 * half)
    assert ci.high == pytest.approx(p_hat + half, abs=0.15 * half)


def test_paired_difference_of_identical_runs_is_exactly_zero():
    runs = [(np.random.default_rng(s).random(300) < 0.6).astype(float)[:, None] for s in range(3)]
    ci = paired_difference("accuracy", runs, runs)
    assert (ci.estimate, ci.low, ci.high) == (0.0, 0.0, 0.0)


def test_paired_difference_sees_a_small_consistent_gain_that_unpaired_noise_would_hide():
    """B is A with 3 % of its errors fixed: the pairing makes the CI exclude 0."""
    rng = np.random.default_rng(2)
    a = (rng.random(2000) < 0.6).astype(float)
    b = a.copy()
    fixed = rng.choice(np.flatnonzero(a == 0), size=int(0.03 * 2000), replace=False)
    b[fixed] = 1.0
    ci = paired_difference("accuracy", [b[:, None]], [a[:, None]])
    assert ci.estimate == pytest.approx(0.03)
    assert 0 < ci.low < 0.03 < ci.high


def test_seed_resampling_widens_the_interval_when_seeds_disagree():
    rng = np.random.default_rng(3)
    base = (rng.random(1000) < 0.5).astype(float)[:, None]
    agreeing = [base, base, base]
    disagreeing = [(rng.random(1000) < q).astype(float)[:, None] for q in (0.4, 0.5, 0.6)]
    narrow = bootstrap_mean("accuracy", agreeing)
    wide = bootstrap_mean("accuracy", disagreeing)
    assert (wide.high - wide.low) > 1.5 * (narrow.high - narrow.low)


def test_verdicts_are_read_off_the_interval():
    assert verdict(Interval(0.02, 0.01, 0.03)) == "reproduced"
    assert verdict(Interval(-0.02, -0.03, -0.01)) == "contradicted"
    assert verdict(Interval(0.02, -0.01, 0.05)) == "inconclusive"


def test_claims_are_judged_only_where_both_methods_ran():
    good = np.ones((100, 1))
    bad = np.zeros((100, 1))
    claims = (Claim("a", "b", "a beats b", "test"), Claim("a", "c", "a beats c", "test"),
              Claim("a", "b", "only on t2", "test", tasks=("t2",)))
    out = judge_all({"t1": {"a": [good], "b": [bad]}}, {"t1": "accuracy"}, claims)
    assert [(j.claim.worse, j.task, j.verdict) for j in out] == [("b", "t1", "reproduced")]
    # the other two are named as not judged: a method missing, a task not run
    assert unjudged(out, claims) == list(claims[1:])


def test_nested_subsets_grow_by_adding_examples():
    indices = list(range(0, 300, 3))
    small, large = nested_subset(indices, 0.1), nested_subset(indices, 0.5)
    assert len(small) == 10 and len(large) == 50
    assert set(small) <= set(large) <= set(indices)
    assert nested_subset(indices, 0.1) == small            # deterministic
    assert nested_subset(indices, 1.0) == indices
    assert nested_subset(indices[:3], 0.01) == [nested_subset(indices[:3], 0.01)[0]]  # >= 1
    with pytest.raises(ValueError):
        nested_subset(indices, 0.0)


def test_contrast_of_two_terms_is_the_paired_difference_and_four_terms_a_double_difference():
    rng = np.random.default_rng(0)
    runs = {name: [rng.integers(0, 2, size=(200, 1)).astype(float) for _ in range(3)]
            for name in "abcd"}
    pair = paired_difference("accuracy", runs["a"], runs["b"])
    assert contrast("accuracy", [(1.0, runs["a"]), (-1.0, runs["b"])]) == pair
    double = contrast("accuracy", [(1.0, runs["a"]), (-1.0, runs["b"]),
                                   (-1.0, runs["c"]), (1.0, runs["d"])])
    mean = {k: np.mean([r.mean() for r in v]) for k, v in runs.items()}
    assert double.estimate == pytest.approx(mean["a"] - mean["b"] - mean["c"] + mean["d"])
    assert double.low < double.estimate < double.high
    # the same runs on both sides cancel exactly in every replicate
    zero = contrast("accuracy", [(1.0, runs["a"]), (-1.0, runs["a"])])
    assert (zero.low, zero.estimate, zero.high) == (0.0, 0.0, 0.0)
