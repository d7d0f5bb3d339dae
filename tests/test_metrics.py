"""Each packaged metric against small cases whose expected scores are worked out by hand."""

import importlib.util
import subprocess
import sys
import socket
import warnings

import pytest

from ctxrep.metrics import METRIC_NAMES, compute, load_metric, metric_path

approx = pytest.approx


# --- loading -----------------------------------------------------------------


def test_all_metrics_load_by_local_path_without_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("metric loading tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    for name in METRIC_NAMES:
        assert metric_path(name).is_file()
        assert load_metric(name).name == name


def test_unknown_metric_is_rejected():
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        load_metric("bleu")


def test_the_catalogue_names_keys_each_module_returns_and_statistics_the_bootstrap_knows():
    """Every metric module's catalogue entry: its headline key and each resampled key are keys
    the module returns; each statistic is one the bootstrap computes, and on the same inputs
    gives the module's value: both in percent once scaled (statistics are fractions)."""
    from ctxrep.analysis.bootstrap import example_stats, metric_value
    from ctxrep.metrics import CATALOGUE, metric_info

    labels, gold = [0, 1, 1, 0, 2, 1], [0, 1, 0, 0, 1, 1]
    tags, gold_tags = [["B-PER", "O"], ["O", "B-LOC"]], [["B-PER", "O"], ["B-LOC", "O"]]
    inputs = {  # module inputs, and the statistic's (as the transfer saves predictions)
        "accuracy": ((labels, gold), (labels, gold)),
        "macro_f1": ((labels, gold), (labels, gold)),
        "binary_f1": (([0, 1, 1, 0], [0, 1, 0, 1]),) * 2,
        "matthews_correlation": (([0, 1, 1, 0], [0, 1, 0, 1]),) * 2,
        "pearson_spearman": (([0.1, 0.5, 0.2, 0.9], [0.0, 0.4, 0.3, 1.0]),) * 2,
        "seqeval_f1": ((tags, gold_tags),) * 2,
        "token_accuracy": ((tags, gold_tags),) * 2,
        "squad": (([_p("a", "the cat"), _p("b", "a dog")], [_q("a", "cat"), _q("b", "dog house")]),
                  (["the cat", "a dog"], [["cat"], ["dog house"]])),
    }
    assert set(inputs) == set(CATALOGUE) == set(METRIC_NAMES)
    for name, entry in CATALOGUE.items():
        (preds, refs), (stat_preds, stat_refs) = inputs[name]
        out = compute(name, preds, refs)
        assert entry.headline in out and set(entry.statistics) <= set(out), name
        assert metric_info(name) is entry
        for key, statistic in entry.statistics.items():
            value = metric_value(statistic, example_stats(statistic, stat_preds, stat_refs))
            assert value * 100.0 == approx(out[key] * entry.percent), (name, key)
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        metric_info("bleu")


# --- accuracy ----------------------------------------------------------------


def test_accuracy():
    # positions 0, 1, 3 agree; 2 and 4 do not -> 3 / 5 = 0.6
    assert compute("accuracy", [0, 1, 1, 0, 2], [0, 1, 0, 0, 1]) == {"accuracy": approx(0.6)}


def test_accuracy_string_labels():
    # "pos" == "pos", "neg" != "pos" -> 1 / 2
    assert compute("accuracy", ["pos", "neg"], ["pos", "pos"]) == {"accuracy": approx(0.5)}


# --- macro F1 ----------------------------------------------------------------

# refs  0 0 1 1 2
# preds 0 0 1 0 1      (class 2 is never predicted)
# class 0: TP=2 (i=0,1), FP=1 (i=3), FN=0 -> F1 = 2*2 / (2*2 + 1 + 0) = 4/5 = 0.8
# class 1: TP=1 (i=2),   FP=1 (i=4), FN=1 (i=3) -> F1 = 2 / (2 + 1 + 1) = 0.5
# class 2: TP=0, FP=0, FN=1 (i=4) -> F1 = 0
# macro = (0.8 + 0.5 + 0) / 3 = 1.3 / 3 = 0.4333...   (accuracy would be 3/5 = 0.6)
MF1_REFS = [0, 0, 1, 1, 2]
MF1_PREDS = [0, 0, 1, 0, 1]


def test_macro_f1_with_a_class_never_predicted():
    out = compute("macro_f1", MF1_PREDS, MF1_REFS)
    assert out["macro_f1"] == approx(1.3 / 3)
    assert out["per_class_f1"] == {"0": approx(0.8), "1": approx(0.5), "2": 0.0}


def test_macro_f1_explicit_labels_include_absent_class():
    # class 3 appears nowhere and scores 0: (0.8 + 0.5 + 0 + 0) / 4 = 0.325
    out = compute("macro_f1", MF1_PREDS, MF1_REFS, labels=[0, 1, 2, 3])
    assert out["macro_f1"] == approx(0.325)


def test_macro_f1_perfect_is_one():
    assert compute("macro_f1", ["a", "b", "c"], ["a", "b", "c"])["macro_f1"] == approx(1.0)


# --- GLUE: binary F1, Matthews correlation -----------------------------------

# refs  1 1 1 0 0 0 0
# preds 1 1 0 1 0 0 0
# class 1: TP=2 (i=0,1), FP=1 (i=3), FN=1 (i=2), TN=3 (i=4,5,6)
GLUE_REFS = [1, 1, 1, 0, 0, 0, 0]
GLUE_PREDS = [1, 1, 0, 1, 0, 0, 0]


def _quietly(name, predictions, references):
    """``compute`` with every warning raised as an error (the module is loaded first, outside)."""
    compute(name, GLUE_PREDS, GLUE_REFS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return compute(name, predictions, references)


def test_binary_f1_is_the_f1_of_class_1():
    # F1 = 2*TP / (2*TP + FP + FN) = 4 / (4 + 1 + 1) = 2/3
    # (class 0 would give TP=3, FP=1, FN=1 -> 6/8 = 0.75; accuracy is 5/7)
    assert compute("binary_f1", GLUE_PREDS, GLUE_REFS) == {"binary_f1": approx(2 / 3)}


def test_binary_f1_without_positive_predictions_is_zero_and_silent():
    # TP = FP = 0, FN = 2 -> precision 0/0; F1 = 2*0 / (0 + 0 + 2) = 0
    assert _quietly("binary_f1", [0, 0, 0], [1, 0, 1]) == {"binary_f1": 0.0}
    # nothing positive anywhere: 0/0 throughout, still 0.0
    assert _quietly("binary_f1", [0, 0], [0, 0]) == {"binary_f1": 0.0}


def test_binary_f1_rejects_labels_other_than_0_and_1():
    with pytest.raises(ValueError, match=r"labels must be 0 or 1, got \[2\]"):
        compute("binary_f1", [0, 2], [0, 1])


def test_matthews_correlation():
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))
    # = (2*3 - 1*1) / sqrt(3 * 3 * 4 * 4) = 5 / 12 = 0.41666...
    assert compute("matthews_correlation", GLUE_PREDS, GLUE_REFS) == {"matthews_correlation": approx(5 / 12)}


def test_matthews_correlation_of_inverted_predictions_is_minus_one():
    # TP = TN = 0, FP = 1, FN = 2: (0 - 2) / sqrt(1 * 2 * 1 * 2) = -2 / 2 = -1
    assert compute("matthews_correlation", [0, 1, 0], [1, 0, 1]) == {"matthews_correlation": approx(-1.0)}


def test_matthews_correlation_of_a_constant_prediction_is_zero():
    # all predicted 1: TN = FN = 0, so the factor (TN + FN) = 0 -> 0 / 0, defined as 0.0
    assert _quietly("matthews_correlation", [1, 1, 1, 1], [1, 0, 1, 0]) == {"matthews_correlation": 0.0}


# --- regression: Pearson and Spearman ------------------------------------------


def test_pearson_spearman_hand_case():
    # x = 1 2 3 10 (mean 4), y = 1 2 3 4 (mean 2.5)
    # x - 4   = -3   -2   -1   6     sum sq = 9 + 4 + 1 + 36 = 50
    # y - 2.5 = -1.5 -0.5  0.5 1.5   sum sq = 2.25 + 0.25 + 0.25 + 2.25 = 5
    # products: 4.5 + 1 - 0.5 + 9 = 14 -> pearson = 14 / sqrt(50 * 5) = 14 / sqrt(250) = 0.88543...
    # ranks agree exactly (1 2 3 4 both) -> spearman = 1
    out = compute("pearson_spearman", [1.0, 2.0, 3.0, 10.0], [1.0, 2.0, 3.0, 4.0])
    assert out == {"pearson": approx(14 / 250**0.5), "spearman": approx(1.0)}


def test_spearman_ties_share_the_mean_rank():
    # x = 0.5 1 1 2 -> ranks 1 2.5 2.5 4 (mean 2.5), deviations -1.5 0 0 1.5, sum sq 4.5
    # y = 1 2 3 4   -> ranks 1 2 3 4, deviations -1.5 -0.5 0.5 1.5, sum sq 5
    # products 2.25 + 0 + 0 + 2.25 = 4.5 -> spearman = 4.5 / sqrt(4.5 * 5) = sqrt(0.9) = 0.94868...
    out = compute("pearson_spearman", [0.5, 1.0, 1.0, 2.0], [1.0, 2.0, 3.0, 4.0])
    assert out["spearman"] == approx(0.9**0.5)


def test_pearson_spearman_of_a_constant_prediction_is_zero():
    # all predictions 3.0: both correlations are 0/0; the module defines them as 0.0 (no nan, no warning)
    compute("pearson_spearman", [1.0, 2.0], [1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compute("pearson_spearman", [3.0, 3.0, 3.0], [1.0, 2.0, 5.0]) == {"pearson": 0.0, "spearman": 0.0}
        assert compute("pearson_spearman", [1.0, 2.0, 5.0], [4.0, 4.0, 4.0]) == {"pearson": 0.0, "spearman": 0.0}


def test_pearson_spearman_rejects_nan():
    with pytest.raises(ValueError, match=r"predictions\[1\] is nan"):
        compute("pearson_spearman", [1.0, float("nan")], [1.0, 2.0])


def test_glue_metrics_return_plain_floats():
    for name, preds, refs in [("binary_f1", GLUE_PREDS, GLUE_REFS),
                              ("matthews_correlation", GLUE_PREDS, GLUE_REFS),
                              ("pearson_spearman", [1.0, 2.0, 4.0], [1.0, 3.0, 2.0])]:
        assert all(type(v) is float for v in compute(name, preds, refs).values()), name


# --- seqeval F1 (entity level, CoNLL) ----------------------------------------


def test_seqeval_right_type_wrong_boundary_is_wrong():
    # gold PER spans tokens 0-1; predicted PER spans token 0 only -> 0 correct of 1 predicted, 1 gold
    # P = 0/1, R = 0/1, F1 = 0; token accuracy: B-PER ok, O vs I-PER wrong, O ok -> 2/3
    out = compute("seqeval_f1", [["B-PER", "O", "O"]], [["B-PER", "I-PER", "O"]])
    assert (out["precision"], out["recall"], out["f1"]) == (0.0, 0.0, 0.0)
    assert out["accuracy"] == approx(2 / 3)


def test_seqeval_i_tag_can_start_an_entity():
    # conlleval: "I-LOC" after "O" opens a LOC entity, so I-LOC(0) matches gold B-LOC(0)
    # entity P = R = F1 = 1/1, although the tags themselves differ: token accuracy 1/2
    out = compute("seqeval_f1", [["I-LOC", "O"]], [["B-LOC", "O"]])
    assert (out["precision"], out["recall"], out["f1"]) == (approx(1.0), approx(1.0), approx(1.0))
    assert out["accuracy"] == approx(0.5)


def test_seqeval_entities_do_not_cross_sentences():
    # gold: PER at end of sentence 1, and "I-PER" opening a second PER in sentence 2 -> 2 gold entities
    # pred finds only the first -> P = 1/1, R = 1/2, F1 = 2 * 1 * 0.5 / 1.5 = 2/3
    out = compute("seqeval_f1", [["O", "B-PER"], ["O", "O"]], [["O", "B-PER"], ["I-PER", "O"]])
    assert (out["precision"], out["recall"], out["f1"]) == (approx(1.0), approx(0.5), approx(2 / 3))


def test_seqeval_overall_and_per_type():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-PER"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "O"]]
    # gold entities: PER(s1 0-1), LOC(s1 3), ORG(s2 0), PER(s2 2)  -> 4
    # pred entities: PER(s1 0-1), ORG(s1 3), ORG(s2 0)             -> 3
    # correct: PER(s1 0-1), ORG(s2 0)                              -> 2
    # P = 2/3, R = 2/4, F1 = 2 * (2/3)(1/2) / (2/3 + 1/2) = (2/3) / (7/6) = 4/7
    out = compute("seqeval_f1", pred, gold)
    assert out["precision"] == approx(2 / 3)
    assert out["recall"] == approx(0.5)
    assert out["f1"] == approx(4 / 7)
    # token accuracy: s1 3 of 4 (LOC vs ORG wrong), s2 2 of 3 (B-PER vs O wrong) -> 5/7
    assert out["accuracy"] == approx(5 / 7)
    # PER: 1 of 1 predicted correct, 1 of 2 gold found -> P 1, R 1/2, F1 = 1 / 1.5 = 2/3
    # LOC: nothing predicted (P := 0), 0 of 1 gold       -> F1 0
    # ORG: 1 of 2 predicted correct, 1 of 1 gold found -> P 1/2, R 1, F1 = 1 / 1.5 = 2/3
    per_type = out["per_type"]
    assert set(per_type) == {"PER", "LOC", "ORG"}
    assert per_type["PER"] == {"precision": approx(1.0), "recall": approx(0.5), "f1": approx(2 / 3), "number": 2}
    assert per_type["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "number": 1}
    assert per_type["ORG"] == {"precision": approx(0.5), "recall": approx(1.0), "f1": approx(2 / 3), "number": 1}


def test_seqeval_length_mismatch_names_the_sequence():
    with pytest.raises(ValueError, match="sequence 1"):
        compute("seqeval_f1", [["O"], ["O", "O"]], [["O"], ["O"]])


# --- token accuracy (POS) ----------------------------------------------------


def test_token_accuracy_flattens_sequences():
    # 3 + 2 = 5 tokens; only VBZ vs VBD is wrong -> 4/5 = 0.8
    pred = [["DT", "NN", "VBZ"], ["PRP", "VBD"]]
    gold = [["DT", "NN", "VBD"], ["PRP", "VBD"]]
    assert compute("token_accuracy", pred, gold) == {"token_accuracy": approx(0.8), "num_tokens": 5}


def test_token_accuracy_weights_tokens_not_sentences():
    # sentence means would be (0/1 + 3/3) / 2 = 0.5; token accuracy is 3/4 = 0.75
    pred = [["NN"], ["DT", "NN", "."]]
    gold = [["VB"], ["DT", "NN", "."]]
    assert compute("token_accuracy", pred, gold)["token_accuracy"] == approx(0.75)


def test_token_accuracy_length_mismatch_names_the_sequence():
    with pytest.raises(ValueError, match=r"sequence 1 has 1 predicted tags but 2 gold tags"):
        compute("token_accuracy", [["DT", "NN"], ["DT"]], [["DT", "NN"], ["DT", "NN"]])


def test_token_accuracy_rejects_different_sequence_counts():
    with pytest.raises(ValueError):
        compute("token_accuracy", [["DT"]], [["DT"], ["NN"]])


# --- SQuAD v1.1 ----------------------------------------------------------------


def _squad_module():
    spec = importlib.util.spec_from_file_location("squad_script", metric_path("squad"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "text, normalised",
    [
        ("The  Denver Broncos!", "denver broncos"),
        ("a  Tale, of Two-Cities.", "tale of twocities"),  # punctuation is deleted, not spaced
        ("An apple", "apple"),
        ("theatre of the absurd", "theatre of absurd"),  # "the" only as a whole word
        ("  ", ""),
    ],
)
def test_squad_normalisation(text, normalised):
    assert _squad_module().normalize_answer(text) == normalised


def _q(qid, *answers):
    return {"id": qid, "answers": {"text": list(answers), "answer_start": [0] * len(answers)}}


def _p(qid, text):
    return {"id": qid, "prediction_text": text}


def _squad(pred_text, *answers):
    return compute("squad", [_p("q", pred_text)], [_q("q", *answers)])


def test_squad_normalised_exact_match():
    assert _squad("The  Denver Broncos!", "denver broncos") == {"exact_match": 100.0, "f1": 100.0}


def test_squad_partial_overlap_f1():
    # pred tokens [denver, broncos, team], gold [denver, broncos] ("the" dropped): overlap 2
    # P = 2/3, R = 2/2, F1 = 2 * (2/3) * 1 / (2/3 + 1) = (4/3) / (5/3) = 0.8 -> 80
    assert _squad("Denver Broncos team", "the Denver Broncos") == {"exact_match": 0.0, "f1": approx(80.0)}


def test_squad_repeated_tokens_count_once_per_match():
    # pred [broncos, broncos], gold [broncos]: overlap min(2, 1) = 1; P = 1/2, R = 1 -> F1 = 1 / 1.5 = 2/3
    assert _squad("Broncos Broncos", "Broncos")["f1"] == approx(200 / 3)


def test_squad_max_over_gold_answers():
    # pred [denver, broncos, defense]
    # vs "Broncos":                     overlap 1, P 1/3, R 1   -> F1 = (2/3) / (4/3) = 0.5
    # vs "Denver Broncos defense line": overlap 3, P 1,   R 3/4 -> F1 = (3/2) / (7/4) = 6/7
    # vs "Carolina":                    overlap 0               -> 0
    # max = 6/7; no exact match with any
    out = _squad("Denver Broncos defense", "Broncos", "Denver Broncos defense line", "Carolina")
    assert out == {"exact_match": 0.0, "f1": approx(600 / 7)}
    # EM is also a max: the second gold matches exactly after normalisation
    assert _squad("broncos", "Denver Broncos", "The Broncos.")["exact_match"] == 100.0


def test_squad_empty_prediction_scores_zero():
    assert _squad("", "Denver") == {"exact_match": 0.0, "f1": 0.0}


def test_squad_averages_over_questions_in_percent():
    preds = [
        _p("q1", "The  Denver Broncos!"),  # EM 1, F1 1
        _p("q2", "Denver Broncos team"),  # EM 0, F1 0.8 (as above)
        _p("q3", "Denver Broncos defense"),  # EM 0, F1 6/7 (as above)
        _p("q4", ""),  # EM 0, F1 0
    ]
    refs = [
        _q("q1", "denver broncos"),
        _q("q2", "the Denver Broncos"),
        _q("q3", "Broncos", "Denver Broncos defense line"),
        _q("q4", "Denver"),
    ]
    # EM = 100 * 1/4 = 25; F1 = 100 * (1 + 0.8 + 6/7 + 0) / 4 = 66.428...
    out = compute("squad", preds, refs)
    assert out["exact_match"] == approx(25.0)
    assert out["f1"] == approx(100 * (1 + 0.8 + 6 / 7) / 4)


def test_squad_matches_by_id_and_unanswered_scores_zero():
    # q1 answered exactly (order differs from refs); q2 has no prediction (the other one is for an
    # unknown id) -> EM = F1 = 100 * 1/2 = 50
    out = compute("squad", [_p("zz", "x"), _p("q1", "Broncos")], [_q("q1", "Broncos"), _q("q2", "Panthers")])
    assert out == {"exact_match": 50.0, "f1": 50.0}


def test_loading_a_metric_skips_what_evaluators_import_and_leaves_it_importable():
    """`import evaluate` would import transformers (its pipelines: seconds per stage) and
    scipy.stats for its evaluators, which ctxrep never uses; ours must not, must not leave
    those modules unimportable for code that needs them later, and a metric that needs
    scipy.stats still computes."""
    code = ("import sys\n"
            "from ctxrep.metrics import compute\n"
            "assert compute('accuracy', [0, 1], [0, 0]) == {'accuracy': 0.5}\n"
            "skipped = {'transformers', 'transformers.pipelines', 'scipy.stats'}\n"
            "assert not skipped & set(sys.modules), skipped & set(sys.modules)\n"
            "assert round(compute('pearson_spearman', [0.1, 0.5, 0.9], [0.2, 0.4, 1.0])['spearman'], 6) == 1\n"
            "import scipy.stats, transformers.pipelines\n"
            "assert hasattr(transformers.pipelines, 'pipeline') and hasattr(scipy.stats, 'pearsonr')\n")
    subprocess.run([sys.executable, "-c", code], check=True)
