"""Published ELMo weights (bilm-tf / AllenNLP format) imported into ctxrep's BiLM.

The fixture (``../shared/fixtures/elmo-allennlp``) is a small checkpoint bilm-tf wrote, with the
token-layer vectors bilm-tf computed for ``vocab_test.txt``. The contextual layers are checked
against an independent NumPy transcription of TF's LSTMCell working on the raw hdf5 arrays.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from ctxrep.cli import main
from ctxrep.errors import InputError
from ctxrep.models.elmo import Elmo
from ctxrep.models.elmo_import import load_bilm_tf, read_options
from ctxrep.text.elmo_chars import batch_to_char_ids, word_to_char_ids

h5py = pytest.importorskip("h5py")  # a declared dependency; absent only in a broken environment

FIXTURE = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "elmo-allennlp"
OPTIONS, WEIGHTS = FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5"

pytestmark = pytest.mark.skipif(not FIXTURE.is_dir(), reason=f"fixture folder {FIXTURE} is absent")


def fixture_vocab() -> list[str]:
    return (FIXTURE / "vocab_test.txt").read_text(encoding="utf-8").splitlines()


def fixture_sentences() -> list[list[list[str]]]:
    batches = json.loads((FIXTURE / "sentences.json").read_text(encoding="utf-8"))
    return [[sentence.split() for sentence in batch] for batch in batches]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The matrices here are tiny; on a busy 2-core machine torch's thread hand-offs cost 50x the math."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Elmo:
    out = tmp_path_factory.mktemp("elmo") / "model"
    main(["import-elmo", str(OPTIONS), str(WEIGHTS), str(out)])
    return Elmo.from_pretrained(out)


# -----------------------------------------------------------------------------
# character ids: bilm-tf numbering (UTF-8 bytes; 256 <S>, 257 </S>, 258 begin-of-word,
# 259 end-of-word, 260 padding; every id + 1 so 0 is a missing word), written out by hand

BOW, EOW, PAD = 258 + 1, 259 + 1, 260 + 1


def test_char_ids_of_sentence_markers():
    assert word_to_char_ids("<S>") == [BOW, 256 + 1, EOW] + [PAD] * 47
    assert word_to_char_ids("</S>") == [BOW, 257 + 1, EOW] + [PAD] * 47


def test_char_ids_of_a_60_byte_word_keep_its_first_48_bytes():
    word = "abcdefghij" * 6
    assert len(word.encode("utf-8")) == 60
    expected = [BOW] + [b + 1 for b in word.encode("utf-8")[:48]] + [EOW]  # exactly 50: no padding left
    assert word_to_char_ids(word) == expected


def test_char_ids_of_non_ascii_words_are_their_utf8_bytes():
    # "café": c a f then é = 0xC3 0xA9
    assert word_to_char_ids("café") == [BOW, 0x63 + 1, 0x61 + 1, 0x66 + 1, 0xC3 + 1, 0xA9 + 1, EOW] + [PAD] * 43
    # 61 bytes: truncation to 48 bytes cuts the 24th "é" after its first byte, as bilm-tf does
    word = "a" + "é" * 30
    expected = [BOW, 0x61 + 1] + [0xC3 + 1, 0xA9 + 1] * 23 + [0xC3 + 1, EOW]
    assert len(expected) == 50 and word_to_char_ids(word) == expected


# -----------------------------------------------------------------------------
# the imported model


def test_fixture_imports_and_gives_three_layers_of_width_32(imported):
    config = imported.bilm.config
    assert (config.n_layers, config.projection_dim, config.cell_dim, config.n_highway) == (2, 16, 64, 2)
    assert (config.cell_clip, config.proj_clip, config.skip_connections) == (3.0, 3.0, True)
    assert imported.vocab == [] and imported.bilm.softmax is None
    for batch in fixture_sentences():
        with torch.no_grad():
            out = imported(batch)
        longest = max(len(s) for s in batch)
        assert out.layers.shape == (len(batch), 3, longest, 32)
        assert out.mask.sum(1).tolist() == [len(s) for s in batch]
        assert torch.isfinite(out.layers).all()


def test_token_layer_matches_bilm_tf_within_1e_5(imported):
    vocab = fixture_vocab()
    with h5py.File(FIXTURE / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...]
    assert expected.shape == (len(vocab), 16) and {"<S>", "</S>", "<UNK>"} <= set(vocab)
    char_ids = batch_to_char_ids([[w] for w in vocab], add_bos_eos=False)
    with torch.no_grad():
        tokens = imported.bilm.token_encoder(char_ids, torch.ones(char_ids.shape[:2], dtype=torch.bool))
    np.testing.assert_allclose(tokens[:, 0].numpy(), expected, rtol=0, atol=1e-5)
    # Elmo's layer 0 is that vector twice
    with torch.no_grad():
        layer0 = imported([["good", "Why"]]).layers[0, 0]
    index = {w: i for i, w in enumerate(vocab)}
    row = np.concatenate([expected[[index["good"], index["Why"]]]] * 2, axis=1)
    np.testing.assert_allclose(layer0.numpy(), row, rtol=0, atol=1e-5)


def test_pair_loads_like_the_imported_directory(imported):
    direct = Elmo.from_pretrained((OPTIONS, WEIGHTS))
    batch = fixture_sentences()[1]
    with torch.no_grad():
        torch.testing.assert_close(direct(batch).layers, imported(batch).layers, rtol=0, atol=0)


# -----------------------------------------------------------------------------
# the contextual layers against TF's LSTMCell, written out in NumPy on the raw hdf5 arrays


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def tf_lstm_layer(inputs: np.ndarray, W: np.ndarray, B: np.ndarray, W_P: np.ndarray,
                  cell_clip: float, proj_clip: float, clipped: list[int]) -> np.ndarray:
    """TF LSTMCell(num_proj, cell_clip, proj_clip, forget_bias=1.0) over inputs (T, P) from zero state."""
    C, P = W_P.shape
    c, m = np.zeros(C), np.zeros(P)
    outputs = []
    for x in inputs:
        z = np.concatenate([x, m]) @ W + B
        i, j, f, o = z[:C], z[C : 2 * C], z[2 * C : 3 * C], z[3 * C :]
        c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
        clipped[0] += int((np.abs(c) > cell_clip).sum())
        c = np.clip(c, -cell_clip, cell_clip)
        m = (sigmoid(o) * np.tanh(c)) @ W_P
        clipped[1] += int((np.abs(m) > proj_clip).sum())
        m = np.clip(m, -proj_clip, proj_clip)
        outputs.append(m)
    return np.stack(outputs)


def numpy_bilm_layers(weights: Path, tokens: np.ndarray, clipped: list[int]) -> list[np.ndarray]:
    """[<S> w_1 .. w_n </S>] token vectors (T, P) -> layers 1, 2 as (T, 2P) = [forward; backward]."""
    layers = []
    with h5py.File(weights, "r") as f:
        directions = []
        for d, sequence in ((0, tokens), (1, tokens[::-1])):  # the backward LM reads right to left
            x, states = sequence, []
            for k in range(2):
                cell = f[f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"]
                h = tf_lstm_layer(x, cell["W_0"][...].astype(np.float64), cell["B"][...].astype(np.float64),
                                  cell["W_P_0"][...].astype(np.float64), 3.0, 3.0, clipped)
                if k > 0:  # skip connection between LSTM layers
                    h = h + x
                states.append(h if d == 0 else h[::-1])
                x = h
            directions.append(states)
    for k in range(2):
        layers.append(np.concatenate([directions[0][k], directions[1][k]], axis=1))
    return layers


def test_contextual_layers_match_tf_lstm_cell_formulas(imported):
    with h5py.File(FIXTURE / "elmo_token_embeddings.hdf5", "r") as f:
        table = f["embedding"][...].astype(np.float64)
    index = {w: i for i, w in enumerate(fixture_vocab())}
    sentences = [["Don", "'t", "!"], fixture_sentences()[0][5][:12]]  # padded batch: lengths 3 and 12
    with torch.no_grad():
        out = imported(sentences)
    clipped = [0, 0]
    for b, words in enumerate(sentences):
        tokens = table[[index[w] for w in ["<S>", *words, "</S>"]]]
        for k, expected in enumerate(numpy_bilm_layers(WEIGHTS, tokens, clipped), start=1):
            np.testing.assert_allclose(out.layers[b, k, : len(words)].numpy(), expected[1:-1], rtol=0, atol=1e-5)
    assert clipped[1] > 0, "the projection clip never applied"


def test_clipping_matches_tf_where_it_bites(tmp_path):
    """Open input and forget gates let the cells grow past cell_clip=3; a doubled projection
    passes proj_clip=3. (Without either clip the layers move by > 4e-3, far above the tolerance.)"""
    weights = tmp_path / "clipping.hdf5"
    shutil.copy(WEIGHTS, weights)
    C = 64
    with h5py.File(weights, "r+") as f:
        for d in range(2):
            for k in range(2):
                cell = f[f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"]
                bias = cell["B"][...]
                bias[:C] += 2.0  # i (TF order i, j, f, o)
                bias[2 * C : 3 * C] += 4.0  # f
                cell["B"][...] = bias
                cell["W_P_0"][...] = cell["W_P_0"][...] * 2.0
    elmo = Elmo.from_pretrained((OPTIONS, weights))
    with h5py.File(FIXTURE / "elmo_token_embeddings.hdf5", "r") as f:
        table = f["embedding"][...].astype(np.float64)
    index = {w: i for i, w in enumerate(fixture_vocab())}
    words = fixture_sentences()[2][3][:10]
    with torch.no_grad():
        out = elmo([words])
    clipped = [0, 0]
    tokens = table[[index[w] for w in ["<S>", *words, "</S>"]]]
    for k, expected in enumerate(numpy_bilm_layers(weights, tokens, clipped), start=1):
        np.testing.assert_allclose(out.layers[0, k, : len(words)].numpy(), expected[1:-1], rtol=0, atol=1e-5)
    assert clipped[0] > 100 and clipped[1] > 10, f"the clips never applied: {clipped}"


# -----------------------------------------------------------------------------
# no softmax, bad inputs


def test_training_an_imported_model_says_it_needs_a_softmax(imported):
    char_ids = batch_to_char_ids([["good", "case"]], add_bos_eos=True)
    mask = char_ids[..., 0] != 0
    with pytest.raises(InputError, match="no output softmax.*pretrain_bilm"):
        imported.bilm.lm_loss(char_ids, torch.zeros_like(mask, dtype=torch.long), mask)
    with pytest.raises(InputError, match="no output softmax"):
        imported.bilm.exact_nll(char_ids, torch.zeros_like(mask, dtype=torch.long), mask)


def write_options(tmp_path: Path, edit) -> Path:
    options = json.loads(OPTIONS.read_text())
    edit(options)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    return path


def test_bad_options_files_are_named_with_the_key(tmp_path):
    with pytest.raises(InputError, match="options.json: ELMo options file not found"):
        read_options(tmp_path / "options.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"lstm": {\n  "dim": 64,,\n}}')
    with pytest.raises(InputError, match=r"broken.json: not valid JSON \(line 2"):
        read_options(broken)
    with pytest.raises(InputError, match="'lstm.projection_dim' is missing"):
        read_options(write_options(tmp_path, lambda o: o["lstm"].pop("projection_dim")))
    with pytest.raises(InputError, match="'char_cnn.n_highway' = '2', expected int"):
        read_options(write_options(tmp_path, lambda o: o["char_cnn"].update(n_highway="2")))
    with pytest.raises(InputError, match="'char_cnn' is missing"):
        read_options(write_options(tmp_path, lambda o: o.pop("char_cnn")))
    with pytest.raises(InputError, match="projection is not supported"):
        read_options(write_options(tmp_path, lambda o: o["lstm"].update(projection_dim=64)))


def test_bad_weights_files_name_the_dataset(tmp_path):
    with pytest.raises(InputError, match="missing.hdf5: ELMo weights file not found"):
        load_bilm_tf(OPTIONS, tmp_path / "missing.hdf5")
    partial = tmp_path / "partial.hdf5"
    shutil.copy(WEIGHTS, partial)
    with h5py.File(partial, "r+") as f:
        del f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"]
    missing = "partial.hdf5: dataset 'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0' is missing"
    with pytest.raises(InputError, match=missing):
        load_bilm_tf(OPTIONS, partial)
    # options promising a wider projection than the weights hold
    wider = write_options(tmp_path, lambda o: o["lstm"].update(projection_dim=32))
    with pytest.raises(InputError, match=r"dataset 'CNN_proj/W_proj' has shape \(124, 16\), expected \(124, 32\)"):
        load_bilm_tf(wider, WEIGHTS)


def test_cli_reports_bad_input_with_exit_status_2(tmp_path, capsys):
    bad = write_options(tmp_path, lambda o: o["lstm"].pop("dim"))
    with pytest.raises(SystemExit) as e:
        main(["import-elmo", str(bad), str(WEIGHTS), str(tmp_path / "out")])
    assert e.value.code == 2
    assert "'lstm.dim' is missing" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(SystemExit):
        main(["import-elmo", str(OPTIONS), str(WEIGHTS), str(tmp_path / "notes")])
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"
