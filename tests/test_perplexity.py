"""``ctxrep perplexity``: a tiny real biLM and BERT, saved as the stages save them, scored through
the CLI on a small text; parity with the pipeline's own held-out perplexity, a hand-computed
pseudo-perplexity, a model that learns scores lower, and the one-line errors."""

from __future__ import annotations

import json
import math
from collections import Counter
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from ctxrep.cli import main
from test_model_registry import tiny_bert  # the same tiny real BERT, saved as the stages save it

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXT = ("The cat sat on the mat. The dog sat on the log.\n"
        "A cat and a dog sat on the mat. The zebra sat.\n")
VOCAB = ["<S>", "</S>", "<UNK>", "the", "sat", "on", ".", "cat", "dog", "mat", "The", "log", "a", "A", "and"]

def tiny_bilm_model(seed: int = 0):
    from ctxrep.models.bilm import BiLM, BiLMConfig

    config = BiLMConfig(vocab_size=len(VOCAB), char_embed_dim=4, filters=[[1, 4], [2, 8]], n_highway=1,
                        projection_dim=8, cell_dim=16, n_layers=2, dropout=0.0, activation="relu",
                        cell_clip=None, proj_clip=None, softmax="full", n_negatives=8192)
    torch.manual_seed(seed)
    return BiLM(config)


def save_bilm(bilm, path: Path, vocab=VOCAB) -> Path:
    from ctxrep.models.elmo import Elmo

    Elmo(bilm.eval(), vocab).save_pretrained(path)
    return path


def cli(tmp_path: Path, *args) -> dict:
    out = tmp_path / "ppl.json"
    main(["perplexity", *map(str, args), "--json", str(out)])
    return json.loads(out.read_text())


@pytest.fixture()
def text(tmp_path) -> Path:
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def sentence_arrays(sentences: list[list[str]], types):
    """``sentences`` (word lists) as the pretraining objective reads them; ``types`` (a
    ``WordTypes`` over ``VOCAB``) grows with the word types seen, so its tables come after."""
    from ctxrep.pretraining.bilm_objective import SentenceArrays

    ids, offsets = [], [0]
    for words in sentences:
        ids += types.ids(words)
        offsets.append(len(ids))
    return SentenceArrays(np.asarray(ids, np.int32), np.asarray(offsets, np.int64))


def pipeline_eval(bilm, sentences: list[list[str]]) -> dict:
    """The pretraining loop's held-out perplexity (BiLMObjective.evaluate) on ``sentences``."""
    from ctxrep.pretraining.bilm_objective import BiLMObjective, WordTypes

    types = WordTypes(VOCAB)
    held = sentence_arrays(sentences, types)
    chars, targets = types.tables()
    return BiLMObjective(bilm.eval(), held, held, chars, targets, 2, 0, torch.device("cpu")).evaluate()


def test_bilm_perplexity_matches_the_pipelines_heldout_perplexity(tmp_path, text, capsys):
    from ctxrep.text.segment import split_sentences, word_tokenize

    bilm = tiny_bilm_model()
    model = save_bilm(bilm, tmp_path / "bilm")
    r = cli(tmp_path, model, text)
    table = capsys.readouterr().out
    assert "perplexity forward" in table and "unigram reference" in table
    sentences = [word_tokenize(s) for s in split_sentences(TEXT)]
    assert len(sentences) == 4 and r["sentences"] == 4
    ev = pipeline_eval(bilm, sentences)
    assert r["kind"] == "bilm" and r["tokens"] == sum(map(len, sentences))
    assert r["perplexity_forward"] == pytest.approx(ev["val_ppl_forward"], rel=1e-6)
    assert r["perplexity_backward"] == pytest.approx(ev["val_ppl_backward"], rel=1e-6)
    assert r["perplexity_mean"] == pytest.approx(ev["val_ppl"], rel=1e-6)
    # mean = exp of the mean of the directions' NLL, i.e. their geometric mean
    assert r["perplexity_mean"] == pytest.approx(math.sqrt(r["perplexity_forward"] * r["perplexity_backward"]))
    assert all(math.isfinite(r[k]) for k in ("perplexity_forward", "perplexity_backward", "perplexity_mean"))
    # "zebra" is the one word outside the vocabulary
    assert r["oov_tokens"] == 1 and r["oov_rate"] == pytest.approx(1 / r["tokens"])
    assert r["oov_scored_as"] == "<UNK>"
    assert r["unigram_ppl"] is None and "not available" in r["unigram_note"]


def test_unigram_reference_from_stored_counts_equals_the_pipelines(tmp_path, text):
    from ctxrep.pretraining.bilm_objective import WordTypes, unigram_perplexity
    from ctxrep.text.segment import split_sentences, word_tokenize
    from ctxrep.text.vocab import BOS, save_word_vocab

    train_text = ["the cat sat on the mat .", "a dog sat on the log and a cat sat .", "gnu gnu ."]
    counts = Counter()  # as the tokenize stage counts: words, and <S> once per sentence
    for sentence in train_text:
        counts.update(sentence.split())
    counts[BOS] += len(train_text)
    model = save_bilm(tiny_bilm_model(), tmp_path / "bilm")
    save_word_vocab(VOCAB, counts, model / "bilm_vocab.tsv")
    r = cli(tmp_path, model, text)

    types = WordTypes(VOCAB)
    train = sentence_arrays([s.split() for s in train_text], types)
    held = sentence_arrays([word_tokenize(s) for s in split_sentences(TEXT)], types)
    _, targets = types.tables()
    assert r["unigram_ppl"] == pytest.approx(unigram_perplexity(train, held, targets, len(VOCAB)), rel=1e-9)
    assert r["unigram_note"] is None


def test_bilm_trained_on_the_text_scores_it_lower(tmp_path, text):
    from ctxrep.pretraining.bilm_objective import BiLMObjective, WordTypes
    from ctxrep.text.segment import split_sentences, word_tokenize

    untrained = save_bilm(tiny_bilm_model(), tmp_path / "untrained")
    bilm = tiny_bilm_model()  # the same start
    sentences = [word_tokenize(s) for s in split_sentences(TEXT)]
    types = WordTypes(VOCAB)
    data = sentence_arrays(sentences, types)
    chars, targets = types.tables()
    objective = BiLMObjective(bilm, data, data, chars, targets, 4, 0, torch.device("cpu"))
    optimizer = torch.optim.Adam(bilm.parameters(), lr=1e-2)
    bilm.train()
    batch = objective.batch(list(range(len(data))), 0)
    for _ in range(30):
        loss, _, _ = objective.loss(batch, objective.model)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    trained = save_bilm(bilm, tmp_path / "trained")
    before = cli(tmp_path, untrained, text)["perplexity_mean"]
    after = cli(tmp_path, trained, text)["perplexity_mean"]
    print(f"untrained {before:.3f} -> trained {after:.3f}")
    assert after < 0.7 * before, (before, after)


def test_bert_pseudo_perplexity_by_hand(tmp_path):
    from tokenizers import Tokenizer

    from ctxrep.models.bert_hf import load_pretrained

    model_dir = tiny_bert(tmp_path)
    text = tmp_path / "three.txt"
    text.write_text("the cat sat\n", encoding="utf-8")
    r = cli(tmp_path, model_dir, text)

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    pieces = tok.encode("the cat sat", add_special_tokens=False).ids
    assert len(pieces) == 3 and r["tokens"] == 3
    ids = [tok.token_to_id("[CLS]"), *pieces, tok.token_to_id("[SEP]")]
    model = load_pretrained(model_dir)
    nll, correct = [], 0
    with torch.no_grad():
        for i in (1, 2, 3):
            masked = list(ids)
            masked[i] = tok.token_to_id("[MASK]")
            logits = model.logits(torch.tensor([masked])).mlm_logits[0, i]
            nll.append(-torch.log_softmax(logits, -1)[ids[i]].item())
            correct += int(logits.argmax().item() == ids[i])
    assert r["kind"] == "bert"
    assert r["pseudo_perplexity"] == pytest.approx(math.exp(sum(nll) / 3), rel=1e-5)
    assert r["mlm_accuracy"] == pytest.approx(correct / 3)
    assert r["oov_rate"] == 0.0 and r["unigram_ppl"] is None


def test_bert_unk_share_and_max_tokens(tmp_path, text, capsys):
    model_dir = tiny_bert(tmp_path)
    r = cli(tmp_path, model_dir, text)  # "zebra": letters the tokenizer never saw -> [UNK]
    assert r["tokens"] == r["tokens_total"] and r["oov_tokens"] >= 1
    assert 0 < r["oov_rate"] < 1 and math.isfinite(r["pseudo_perplexity"])
    capped = cli(tmp_path, model_dir, text, "--max-tokens", 5)
    assert capped["tokens"] == 5 and capped["tokens_total"] == r["tokens_total"]
    assert "pseudo-perplexity" in capsys.readouterr().out


def one_line_exit_2(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        main(["perplexity", *map(str, argv)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ctxrep perplexity: ") and "\n" not in err and "Traceback" not in err
    return err


def test_errors(tmp_path, text, capsys):
    bilm = save_bilm(tiny_bilm_model(), tmp_path / "bilm")
    assert "no such text file" in one_line_exit_2(capsys, bilm, tmp_path / "missing.txt")
    assert "no such model folder" in one_line_exit_2(capsys, tmp_path / "nope", text)
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n\n  \n", encoding="utf-8")
    assert "empty" in one_line_exit_2(capsys, bilm, empty)
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text('{"model_type": "gpt2"}')
    assert "neither a saved biLM" in one_line_exit_2(capsys, other, text)
    # an imported bilm-tf model: no softmax, no vocabulary
    from ctxrep.models.bilm import BiLM, BiLMConfig
    from ctxrep.models.elmo import Elmo

    features = BiLM(BiLMConfig(vocab_size=0, char_embed_dim=4, filters=[[1, 4]], projection_dim=8,
                               cell_dim=16, n_layers=1, dropout=0.0, n_highway=1,
                               activation="relu", cell_clip=None, proj_clip=None, softmax="full", n_negatives=8192))
    Elmo(features, []).save_pretrained(tmp_path / "imported")
    assert "needs the LM head" in one_line_exit_2(capsys, tmp_path / "imported", text)
    encoder = tiny_bert(tmp_path, mlm_head=False)
    assert "needs an MLM head" in one_line_exit_2(capsys, encoder, text)
    # not text, or text that is not prose: refused before any model reads it
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"\x00\x00\x00\x00\n")
    assert "control character" in one_line_exit_2(capsys, bilm, nul)
    line = tmp_path / "line.txt"
    line.write_text("word " * 30_000, encoding="utf-8")  # 150,000 characters, no line end
    assert "break the text into lines" in one_line_exit_2(capsys, bilm, line)
    run_on = tmp_path / "run_on.txt"
    run_on.write_text("word " * 5000, encoding="utf-8")  # 25,000 characters, no sentence end
    assert "break the text into sentences" in one_line_exit_2(capsys, bilm, run_on)


@pytest.mark.slow
def test_the_intrinsic_stage_is_what_ctxrep_perplexity_says_on_its_text(tiny_run, tmp_path,
                                                                         capsys):
    """The pipeline's out-of-domain scores (stage intrinsic, metrics/intrinsic.json) are what
    the command prints on the text the stage wrote, and the report states them."""
    repo = tiny_run.repo
    record = json.loads((repo / "metrics/intrinsic.json").read_text())
    text = repo / record["text"]["path"]
    lines = text.read_text().splitlines()
    assert record["text"]["lines"] == len(lines) > 0 and all(line.strip() for line in lines)
    for model, flags in (("bilm", []), ("bert", ["--max-tokens", str(record["bert"]["tokens"])])):
        main(["perplexity", str(repo / "data/models" / model), str(text),
              "--json", str(tmp_path / f"{model}.json"), *flags])
        said = json.loads((tmp_path / f"{model}.json").read_text())
        # the stage ran in portable mode (AVX2), this process runs the CPU's own kernels: the
        # same numbers up to float rounding (exactly the same under the same compute settings)
        for key, value in record[model].items():
            assert said[key] == (pytest.approx(value, rel=1e-6) if isinstance(value, float)
                                 else value), (model, key)
    assert record["bilm"]["unigram_ppl"] is not None  # the model folder keeps its counts
    report = (repo / "reports/report.md").read_text()
    line = next(line for line in report.splitlines() if line.startswith("- out-of-domain text"))
    assert f"{record['bilm']['perplexity_mean']:.1f}" in line
    assert f"{record['bert']['pseudo_perplexity']:.1f}" in line
    assert f"`ctxrep perplexity data/models/bilm {record['text']['path']}`" in line
