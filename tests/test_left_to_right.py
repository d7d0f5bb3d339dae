"""The left-to-right LM of BERT's Table 5 ablation: BERT's network with causal attention
(``BertConfig(is_decoder=True)``) and the next-token objective. Each position sees only itself and
its left; its checkpoint is a Hugging Face BERT decoder; its labels are the next tokens; the
params keep its methods out of the grid's own stages."""

import json
import re
from pathlib import Path

import pytest
import torch

from ctxrep.config import LEFT_TO_RIGHT, ParamError, validate
from ctxrep.config.composition import compose
from ctxrep.models.bert import IGNORE_INDEX, BertForPreTraining
from ctxrep.models.bert_hf import load_pretrained, save_pretrained
from ctxrep.pretraining.bert_data import PretrainingCollator, PretrainingInstance
from ctxrep.pretraining.next_token_objective import NextTokenCollator
from tests.test_bert import padded_batch, randomize_, tiny_config

transformers = pytest.importorskip("transformers")
REPO_ROOT = Path(__file__).resolve().parents[1]


def causal_model(seed: int = 0) -> BertForPreTraining:
    torch.manual_seed(seed)
    return randomize_(BertForPreTraining(tiny_config(hidden_dropout_prob=0.0,
                                                     attention_probs_dropout_prob=0.0,
                                                     is_decoder=True)).eval())


@torch.no_grad()
def test_each_position_sees_only_itself_and_its_left():
    model = causal_model()
    input_ids, token_type_ids, attention_mask = padded_batch(seed=1)
    before = model.bert(input_ids, token_type_ids, attention_mask, output_hidden_states=True)
    changed = input_ids.clone()
    changed[0, 9] = (changed[0, 9] + 1) % 90 + 5  # row 0 has 16 real tokens
    after = model.bert(changed, token_type_ids, attention_mask, output_hidden_states=True)
    for layer_before, layer_after in zip(before.hidden_states, after.hidden_states):
        assert torch.equal(layer_before[0, :9], layer_after[0, :9])  # left of the change: untouched
    assert (before.last_hidden_state[0, 9:] - after.last_hidden_state[0, 9:]).abs().max() > 1e-3
    assert torch.equal(before.last_hidden_state[1:], after.last_hidden_state[1:])


@torch.no_grad()
def test_the_sentence_summary_is_the_last_real_token_and_padding_leaves_it():
    model = causal_model(seed=1)
    input_ids, token_type_ids, attention_mask = padded_batch(seed=2)  # real lengths 16, 11, 7
    out = model.bert(input_ids, token_type_ids, attention_mask)
    last = out.last_hidden_state[torch.arange(3), torch.tensor([15, 10, 6])]
    assert torch.allclose(out.pooled_output, model.bert.pooler(last[:, None], torch.zeros(3, dtype=torch.long)))
    alone = model.bert(input_ids[2:, :7], token_type_ids[2:, :7], attention_mask[2:, :7])
    assert (alone.pooled_output - out.pooled_output[2:]).abs().max() < 1e-5
    assert (alone.last_hidden_state - out.last_hidden_state[2:, :7]).abs().max() < 1e-5


@torch.no_grad()
def test_the_checkpoint_is_a_transformers_bert_decoder_with_the_same_states(tmp_path):
    model = causal_model(seed=2)
    save_pretrained(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["is_decoder"] is True
    theirs = transformers.BertModel.from_pretrained(tmp_path).eval()
    batch = padded_batch(seed=3)
    ours = model.bert(*batch, output_hidden_states=True)
    expected = theirs(input_ids=batch[0], token_type_ids=batch[1], attention_mask=batch[2],
                      output_hidden_states=True)
    real = batch[2].bool()
    for a, b in zip(ours.hidden_states, expected.hidden_states):
        assert (a - b)[real].abs().max() <= 1e-4
    assert load_pretrained(tmp_path).config.is_decoder


def test_an_encoder_checkpoint_says_nothing_of_decoders(tmp_path):
    torch.manual_seed(0)
    save_pretrained(BertForPreTraining(tiny_config()), tmp_path)
    assert "is_decoder" not in json.loads((tmp_path / "config.json").read_text())


def test_next_token_labels_are_the_next_real_token():
    special = PretrainingCollator.from_vocab({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4,
                                              **{f"w{i}": i for i in range(5, 20)}})
    instances = [PretrainingInstance([2, 7, 8, 9, 3], [0] * 5, False, None, None),
                 PretrainingInstance([2, 11, 3], [0] * 3, False, None, None)]
    batch = NextTokenCollator(special)(instances, [0, 1])
    assert batch["input_ids"].tolist() == [[2, 7, 8, 9, 3], [2, 11, 3, 0, 0]]  # nothing masked
    assert batch["labels"].tolist() == [[7, 8, 9, 3, IGNORE_INDEX],
                                        [11, 3, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]]


def test_the_decoder_learns_the_next_token():
    """A few steps on one repeated sequence: the next-token loss falls well below ln(V)."""
    model = causal_model(seed=3).train()
    ids = torch.tensor([[2, 7, 8, 9, 10, 11, 12, 3]] * 4)
    labels = torch.cat([ids[:, 1:], torch.full((4, 1), IGNORE_INDEX)], 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(60):
        loss = model(ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.5


@pytest.fixture(scope="module")
def own_bert(tmp_path_factory):
    return compose("own-bert", root=REPO_ROOT, out=tmp_path_factory.mktemp("p") / "params.yaml")


@pytest.mark.parametrize("key, method", [("feature_based", "gpt-feature"),
                                         ("fine_tuned", "gpt-finetune")])
def test_its_methods_run_through_left_to_right_not_the_grid(own_bert, key, method):
    params = json.loads(json.dumps(own_bert))
    params["grid"][key].append(method)
    with pytest.raises(ParamError, match=f"{method} runs on every grid task when left_to_right lists 'gpt'"):
        validate(params)


def test_an_unknown_left_to_right_family_is_refused(own_bert):
    params = {**own_bert, "left_to_right": ["xlnet"]}
    with pytest.raises(ParamError, match=re.escape(f"left-to-right LM families: {list(LEFT_TO_RIGHT)}")):
        validate(params)


def test_it_trains_here_only(own_bert):
    params = json.loads(json.dumps(own_bert))
    params["pretrain_gpt"]["source"] = "import"
    with pytest.raises(ParamError, match="pretrain_gpt.source"):
        validate(params)
