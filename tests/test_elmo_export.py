"""`ctxrep export-elmo`: a ctxrep biLM written in bilm-tf's layout and imported back."""

from __future__ import annotations

from pathlib import Path

import h5py
import pytest
import torch

from ctxrep.cli import main
from ctxrep.errors import InputError
from ctxrep.models.bilm import BiLM, BiLMConfig
from ctxrep.models.elmo import Elmo, export_elmo
from ctxrep.models.elmo_import import load_bilm_tf

FIXTURE = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "elmo-allennlp"
SENTENCES = [["the", "river", "bank"], ["Ünïcode", "words", "and", "a", "very" * 15], ["one"]]
# every LSTM bias is the sum of two torch vectors before export and one TF vector after it
ROUNDING = 1e-6


def random_bilm(projection_dim: int = 8, filters=((1, 4), (2, 8))) -> BiLM:
    """Two layers with skip connections and both clips, a highway layer, a softmax: every part
    the mapping touches, with every weight (torch's second LSTM bias too) away from zero."""
    config = BiLMConfig(vocab_size=5, char_embed_dim=4, filters=[list(f) for f in filters],
                        n_highway=1, projection_dim=projection_dim, cell_dim=16, n_layers=2,
                        skip_connections=True, cell_clip=3.0, proj_clip=3.0, dropout=0.0,
                        activation="relu", softmax="full", n_negatives=8192)
    torch.manual_seed(0)
    bilm = BiLM(config)
    with torch.no_grad():
        for param in bilm.parameters():
            param.normal_(0.0, 0.7)
        bilm.token_encoder.char_embedding.weight[0] = 0.0   # the padding row stays zero
    return bilm.eval()


def save(bilm: BiLM, path: Path) -> Path:
    Elmo(bilm, ["<S>", "</S>", "<UNK>", "the", "bank"]).save_pretrained(path)
    return path


def test_a_trained_bilm_round_trips_through_the_bilm_tf_layout(tmp_path):
    model = save(random_bilm(), tmp_path / "bilm")
    main(["export-elmo", str(model), str(tmp_path / "tf")])
    options, weights = tmp_path / "tf/options.json", tmp_path / "tf/weights.hdf5"
    with h5py.File(weights) as f:
        names = []
        f.visit(names.append)
    assert not [n for n in names if "softmax" in n.lower()], "bilm-tf's dump has no softmax"

    original = Elmo.from_pretrained(model)
    back = Elmo.from_pretrained((options, weights))
    assert back.vocab == [] and back.bilm.config.vocab_size == 0
    # every weight but the LSTM biases maps by transposes and sign flips: exactly equal
    ours, theirs = original.bilm.state_dict(), back.bilm.state_dict()
    for name, value in theirs.items():
        if "bias_ih" in name or "bias_hh" in name:
            continue
        assert torch.equal(value, ours[name]), name
    for name in [n for n in theirs if "bias_ih" in n]:
        summed = ours[name] + ours[name.replace("bias_ih", "bias_hh")]
        torch.testing.assert_close(theirs[name], summed, atol=ROUNDING, rtol=0)
    a, b = original(SENTENCES), back(SENTENCES)
    assert torch.equal(a.mask, b.mask)
    torch.testing.assert_close(b.layers, a.layers, atol=ROUNDING, rtol=0)
    assert a.layers.abs().amax() >= 3.0 - 1e-6, "the projection clip never applied"


@pytest.mark.skipif(not FIXTURE.is_dir(), reason=f"fixture folder {FIXTURE} is absent")
def test_the_published_fixture_exports_to_its_own_datasets(tmp_path):
    main(["import-elmo", str(FIXTURE / "options.json"), str(FIXTURE / "lm_weights.hdf5"),
          str(tmp_path / "imported")])
    export_elmo(tmp_path / "imported", tmp_path / "tf")
    with h5py.File(FIXTURE / "lm_weights.hdf5") as published, \
            h5py.File(tmp_path / "tf/weights.hdf5") as exported:
        names = []
        exported.visit(lambda n: names.append(n) if isinstance(exported[n], h5py.Dataset) else None)
        for name in names:
            want = torch.from_numpy(published[name][...]).float()
            got = torch.from_numpy(exported[name][...])
            torch.testing.assert_close(got, want, atol=ROUNDING, rtol=0, msg=name)
    bilm, _ = load_bilm_tf(tmp_path / "tf/options.json", tmp_path / "tf/weights.hdf5")
    assert bilm.config == load_bilm_tf(FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5")[0].config


def test_export_stops_on_what_bilm_tf_cannot_hold_and_never_overwrites(tmp_path, capsys):
    # filters as wide as the LSTM input: bilm-tf has no projection layer to hold ours
    square = save(random_bilm(projection_dim=12, filters=((1, 4), (2, 8))), tmp_path / "square")
    with pytest.raises(InputError, match="projection is not the identity"):
        export_elmo(square, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (tmp_path / "taken").mkdir()
    with pytest.raises(SystemExit) as e:
        main(["export-elmo", str(square), str(tmp_path / "taken")])
    assert e.value.code == 2 and "exists" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["export-elmo", str(tmp_path / "nothing"), str(tmp_path / "out")])
    assert e.value.code == 2 and "not a saved Elmo model" in capsys.readouterr().err
