"""Any Hugging Face checkpoint fine-tuned (method ``hf-<name>-finetune``,
ctxrep.models.hf_checkpoint and ctxrep.transfer.finetune), on tiny random RoBERTa, DistilBERT and
GPT-2 checkpoints saved here (tests/hf_checkpoints.py): the task kinds' own formats with each
checkpoint's specials, the summary position each architecture needs, padding invariance, heads
that fit, and a checkpoint that changed after it was recorded. The pipeline run is in
tests/test_dvc_record.py."""

import json
import math
from pathlib import Path

import pytest
import torch

from ctxrep.config.composition import defaults
from ctxrep.kinds.interface import sequence_ends
from ctxrep.models.hf_checkpoint import HFNetwork, checkpoint_record
from ctxrep.transfer.finetune import FineTuning, check_checkpoint, run_finetune
from tests.conftest import cell_data
from tests.hf_checkpoints import ARCHITECTURES, save_tiny_checkpoint
from tests.test_finetune import classification_set, tagging_set


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {a: save_tiny_checkpoint(a, root / a) for a in ARCHITECTURES}


def params(**overrides):
    base = dict(steps=60, eval_every=6, batch_size=4, lr=3e-3, warmup_fraction=0.1,
                weight_decay=0.0, max_seq_len=64, doc_stride=8, dropout=0.0, seeds=None,
                tasks=None)
    return defaults("transfer.hf-finetune", **{**base, **overrides})


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_sequence_is_marked_at_both_ends_with_the_checkpoints_own_specials(
        checkpoints, architecture):
    network = HFNetwork(checkpoints[architecture])
    tokenizer = network.tokenizer
    first, last = sequence_ends(tokenizer)
    names = {"roberta": ("<s>", "</s>"), "distilbert": ("[CLS]", "[SEP]"),
             "gpt2": ("<|endoftext|>", "<|endoftext|>")}[architecture]
    assert (tokenizer.id_to_token(first), tokenizer.id_to_token(last)) == names
    pair = tokenizer.encode("a dog", "the cat")
    assert pair.ids[0] == first and pair.ids[-1] == last
    assert 1 in pair.type_ids or architecture == "roberta"  # RoBERTa has one segment
    # pre-split words (tagging) come out as words of running text, a space before each
    words = tokenizer.encode(["the", "cat"], is_pretokenized=True)
    assert [w for w in words.word_ids if w is not None] == sorted(
        w for w in words.word_ids if w is not None)
    assert network.pad_id is not None


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_only_a_left_to_right_model_is_read_at_its_last_position(checkpoints, architecture):
    """Causality is measured, not read from the config: GPT-2's first state ignores the last
    token, RoBERTa's and DistilBERT's do not; a left-to-right model's summary is its last real
    position, an encoder's its first (or its own pooler)."""
    encoder = HFNetwork(checkpoints[architecture]).encoder(pretrained=True, seed=0)
    assert encoder.left_to_right == (architecture == "gpt2")
    assert encoder.has_pooler == (architecture == "roberta")


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_padding_changes_no_state_and_no_summary(checkpoints, architecture):
    network = HFNetwork(checkpoints[architecture])
    encoder = network.encoder(pretrained=True, seed=0).eval()
    short = network.tokenizer.encode("a dog ran", "the cat sat")
    other = network.tokenizer.encode("the committee reconsidered its recommendations at length")
    width = max(len(short.ids) + 3, len(other.ids))  # the short one padded by 3 at least

    def padded(encoding, field, value):
        return getattr(encoding, field) + [value] * (width - len(encoding.ids))

    ids = torch.tensor([padded(e, "ids", network.pad_id) for e in (short, other)])
    types = torch.tensor([padded(e, "type_ids", 0) for e in (short, other)])
    mask = torch.tensor([padded(e, "attention_mask", 0) for e in (short, other)])
    with torch.no_grad():
        batch = encoder(ids, types, mask)
        alone = encoder(torch.tensor([short.ids]), torch.tensor([short.type_ids]),
                        torch.tensor([[1] * len(short.ids)]))
    n = len(short.ids)
    torch.testing.assert_close(batch.last_hidden_state[0, :n], alone.last_hidden_state[0],
                               atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(batch.pooled_output[0], alone.pooled_output[0],
                               atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("kind,metric,dataset", [
    ("classification", "accuracy", classification_set), ("tagging", "token_accuracy", tagging_set)])
def test_a_head_on_any_checkpoint_fits_a_tiny_task(checkpoints, tmp_path, architecture, kind,
                                                   metric, dataset):
    """The kinds' own formats and heads, unchanged, on each architecture: the training set is
    fitted well past chance, and the FLOPs counted are the checkpoint's."""
    data = dataset()
    every = list(range(len(data)))
    per_epoch = math.ceil(len(data) / 4)
    cell = cell_data(kind, metric, {"train": data, "validation": data}, every, every, 0)
    network = HFNetwork(checkpoints[architecture])
    out = run_finetune(cell, network, True, params(steps=40 * per_epoch, eval_every=per_epoch,
                                                   lr=3e-3), 0, tmp_path / "ck")
    assert out.scores[metric] >= 0.9, out.scores
    assert out.train_flops == pytest.approx(out.train_tokens * 6 * network.weights)


def test_the_random_init_control_starts_from_the_same_config_and_other_weights(checkpoints):
    network = HFNetwork(checkpoints["distilbert"])
    pretrained = network.encoder(pretrained=True, seed=0).model.state_dict()
    # seed 1: the fixture's own weights are a seed-0 init
    scratch = network.encoder(pretrained=False, seed=1).model.state_dict()
    again = network.encoder(pretrained=False, seed=1).model.state_dict()
    assert pretrained.keys() == scratch.keys()
    assert all(torch.equal(scratch[k], again[k]) for k in scratch)
    assert not all(torch.equal(pretrained[k], scratch[k]) for k in scratch)


def test_a_checkpoint_changed_after_it_was_recorded_is_refused(checkpoints, tmp_path):
    folder = save_tiny_checkpoint("gpt2", tmp_path / "gpt2")
    record = tmp_path / "checkpoint.json"
    record.write_text(json.dumps(checkpoint_record(folder)))
    check_checkpoint(folder, record)  # as recorded: no error
    (folder / "config.json").write_text((folder / "config.json").read_text() + " ")
    with pytest.raises(ValueError, match="differ from .*checkpoint.json .*config.json"):
        check_checkpoint(folder, record)


def test_a_fine_tuned_checkpoint_method_needs_its_entry_and_is_keyed_by_its_record(checkpoints):
    """Its checkpoints are keyed by the record of the folder's files (what extract_hf wrote, and
    what ``prepare`` checks the folder against), so the folder is hashed once a cell."""
    p = params()
    with pytest.raises(ValueError, match="hf.rob of the params"):
        FineTuning("hf-rob-finetune", p)
    with pytest.raises(ValueError, match="not a fine-tuning method"):
        FineTuning("hf-rob", p)
    entry = {"path": str(checkpoints["roberta"]), "pooling": "first", "max_seq_len": 64}
    approach = FineTuning.for_cell("hf-rob-finetune", p, {"hf": {"rob": entry}})
    assert approach.source == checkpoints["roberta"]
    assert approach.inputs("sst2") == [Path("data/features/hf-rob/checkpoint.json")]


def test_a_length_past_the_checkpoints_positions_is_refused_naming_the_param(
        checkpoints, tmp_path, monkeypatch):
    """The tests' checkpoints hold 64 positions: 128 sub-words would index past them."""
    from ctxrep.config import ParamError

    monkeypatch.chdir(tmp_path)
    record = tmp_path / "data/features/hf-rob/checkpoint.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps(checkpoint_record(checkpoints["roberta"])))
    entry = {"path": str(checkpoints["roberta"]), "pooling": "first", "max_seq_len": 64}
    approach = FineTuning.for_cell("hf-rob-finetune", params(max_seq_len=128, doc_stride=32),
                                   {"hf": {"rob": entry}})
    with pytest.raises(ParamError, match="'transfer.hf-finetune.max_seq_len' = 128: expected at "
                                         "most the 64 positions"):
        approach.prepare(None)
