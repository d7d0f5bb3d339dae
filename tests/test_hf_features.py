"""Any Hugging Face checkpoint as frozen features (params ``hf``, ctxrep.models.hf_features), on
tiny random RoBERTa, DistilBERT and GPT-2 checkpoints saved here with tokenizers of their own
kind (tests/hf_checkpoints.py). The pipeline run is in tests/test_dvc_record.py."""

import json

import numpy as np
import pytest
import torch

from ctxrep.config import ParamError, read_params
from ctxrep.config.composition import compose
from ctxrep.io import sha256_file
from ctxrep.models.hf_checkpoint import checkpoint_record
from ctxrep.models.hf_features import HFFeaturizer
from tests.conftest import REPO
from tests.hf_checkpoints import ARCHITECTURES, save_tiny_checkpoint

SENTENCE = ["the", "committee", "reconsidered", "its", "recommendations"]
SHORT = ["a", "dog", "ran"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {a: save_tiny_checkpoint(a, root / a) for a in ARCHITECTURES}


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_word_gets_every_layer_whatever_the_architecture(checkpoints, architecture):
    featurize = HFFeaturizer(checkpoints[architecture], "cpu", "mean", 64)
    assert (featurize.n_layers, featurize.dim) == (3, 32)  # h_0 (embeddings), h_1, h_2
    out = featurize([SENTENCE, SHORT, []])
    assert [o.shape for o in out] == [(3, 5, 32), (3, 3, 32), (3, 0, 32)]
    assert all(np.abs(o).sum(axis=(0, 2)).min() > 0 for o in out[:2])  # no word left empty
    assert featurize.tokens > 8 and featurize.flops == 2.0 * featurize.params * featurize.tokens


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_padding_and_the_rest_of_the_batch_change_no_word_vector(checkpoints, architecture):
    featurize = HFFeaturizer(checkpoints[architecture], "cpu", "mean", 64)
    alone = featurize([SHORT])[0]
    beside_a_longer_one = featurize([SENTENCE, SHORT])[1]
    np.testing.assert_allclose(beside_a_longer_one, alone, rtol=0, atol=1e-5)


@pytest.mark.parametrize("pooling", ["first", "mean", "last"])
def test_a_word_is_pooled_from_its_first_last_or_every_sub_word(checkpoints, pooling):
    path = checkpoints["roberta"]
    featurize = HFFeaturizer(path, "cpu", pooling, 64)
    enc = featurize.tokenizer(SENTENCE, is_split_into_words=True, return_tensors="pt")
    pieces = [i for i, w in enumerate(enc.word_ids()) if w == 1]  # "committee"
    assert len(pieces) > 2  # the tiny vocabulary splits it
    with torch.no_grad():
        hidden = torch.stack(featurize.model(**enc, output_hidden_states=True).hidden_states)[:, 0]
    expected = {"first": hidden[:, pieces[0]], "last": hidden[:, pieces[-1]],
                "mean": hidden[:, pieces].mean(1)}[pooling]
    np.testing.assert_allclose(featurize([SENTENCE])[0][:, 1], expected.numpy(), atol=1e-5)


def test_a_left_to_right_checkpoint_never_reads_a_later_word(checkpoints):
    featurize = HFFeaturizer(checkpoints["gpt2"], "cpu", "last", 64)
    before = featurize([SENTENCE])[0]
    after = featurize([[*SENTENCE[:-1], "shells"]])[0]
    np.testing.assert_allclose(after[:, :-1], before[:, :-1], atol=1e-6)
    assert not np.allclose(after[:, -1], before[:, -1])


def test_words_past_max_seq_len_get_zero_vectors_and_are_counted(checkpoints):
    featurize = HFFeaturizer(checkpoints["distilbert"], "cpu", "first", 8)  # [CLS] + 6 + [SEP]
    out = featurize([SENTENCE * 2])[0]
    assert featurize.truncated_words == 4
    assert np.abs(out[:, 6:]).sum() == 0 and np.abs(out[:, :6]).sum(axis=(0, 2)).min() > 0


def test_an_encoder_decoder_checkpoint_is_refused_saying_what_to_save(tmp_path):
    from transformers import T5Config

    T5Config(d_model=16, num_layers=1, num_heads=2, d_ff=32, d_kv=8).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="encoder-decoder.*T5EncoderModel"):
        HFFeaturizer(tmp_path, "cpu", "first", 64)


def test_the_record_hashes_every_file_of_the_checkpoint(checkpoints):
    path = checkpoints["gpt2"]
    record = checkpoint_record(path)
    assert record["model_type"] == "gpt2"
    assert record["files"] == {p.name: sha256_file(p) for p in path.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(record["files"])
    json.dumps(record)


@pytest.mark.parametrize("entry,key,message", [
    ("{path:%s,pooling:first,max_seq_len:64}", "hf.rob.path", None),
    ("{path:CHECKPOINT,pooling:max,max_seq_len:64}", "hf.rob.pooling", "first"),
    ("{path:CHECKPOINT,pooling:first}", "hf.rob.max_seq_len", "required"),
    ("{path:CHECKPOINT,pooling:first,max_seq_len:4}", "hf.rob.max_seq_len", None),
])
def test_a_bad_entry_is_refused_naming_its_key(checkpoints, tmp_path, entry, key, message):
    entry = entry.replace("CHECKPOINT", str(checkpoints["roberta"])).replace("%s", str(tmp_path))
    compose("tiny", [f"+hf.rob={entry}"], root=REPO, out=tmp_path / "params.yaml")
    with pytest.raises(ParamError) as refused:
        read_params(tmp_path)
    assert f"'{key}'" in str(refused.value) and (message is None or message in str(refused.value))


@pytest.mark.parametrize("name", ["Rob", "finetune"])  # finetune: hf-finetune is a section
def test_a_name_that_is_not_a_plain_word_is_refused(checkpoints, tmp_path, name):
    entry = f"{{path:{checkpoints['roberta']},pooling:first,max_seq_len:64}}"
    compose("tiny", [f"+hf.{name}={entry}"], root=REPO, out=tmp_path / "params.yaml")
    with pytest.raises(ParamError, match=f"'hf' = '{name}'"):
        read_params(tmp_path)


def test_a_good_entry_adds_its_method_to_the_report_and_its_stages(checkpoints, tmp_path):
    from ctxrep import config

    entry = f"{{path:{checkpoints['roberta']},pooling:first,max_seq_len:64}}"
    compose("tiny", [f"+hf.rob={entry}"], root=REPO, out=tmp_path / "params.yaml")
    params = read_params(tmp_path)
    methods = config.grid_methods(params["grid"], params["left_to_right"], params["hf"])
    assert methods[-2:] == ["hf-rob", "hf-rob-finetune"]  # frozen, then fine-tuned
    assert config.cell_stage_name("ud_pos", "hf-rob") == "transfer_hf@ud_pos-rob"
    assert config.cell_stage_name("ud_pos", "hf-rob-finetune") == "finetune_hf@ud_pos-rob"
    assert config.extract_stage_name("hf-rob") == "extract_hf@rob"
    assert config.features_of("hf-rob") == "hf-rob" and config.reads_word_vectors("hf-rob")
    assert config.is_finetune_method("hf-rob-finetune") and not config.is_feature_method(
        "hf-rob-finetune") and not config.reads_word_vectors("hf-rob-finetune")
    common, p = config.load_transfer("hf-rob", params)
    assert p == config.load_transfer("bert-feature", params)[1]  # as bert-feature's, by default
    common, tuned = config.load_transfer("hf-rob-finetune", params)
    assert isinstance(tuned, config.FinetuneTrainingParams) and not hasattr(tuned, "bert")
