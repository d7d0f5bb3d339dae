import json

import pytest
import torch

from ctxrep.text import elmo_chars as ec
from ctxrep.text.elmo_chars import CharIdSpec, batch_to_char_ids, char_ids_mask, word_to_char_ids

# every id is shifted by +1 so that 0 can mean "no word"
BOW, EOW, PAD, BOS, EOS = 259, 260, 261, 257, 258


def test_ascii_word_is_wrapped_and_padded():
    ids = word_to_char_ids("cat")
    assert len(ids) == 50
    assert ids[:5] == [BOW, ord("c") + 1, ord("a") + 1, ord("t") + 1, EOW]
    assert ids[5:] == [PAD] * 45


def test_sentence_markers_have_their_own_chars():
    assert word_to_char_ids("<S>")[:4] == [BOW, BOS, EOW, PAD]
    assert word_to_char_ids("</S>")[:4] == [BOW, EOS, EOW, PAD]
    # the marker is recognised as a whole word only, not spelled out
    assert word_to_char_ids("<S>x")[1:4] == [ord("<") + 1, ord("S") + 1, ord(">") + 1]


def test_non_ascii_words_are_utf8_bytes():
    ids = word_to_char_ids("né")  # é is two bytes: 0xC3 0xA9
    assert ids[:5] == [BOW, ord("n") + 1, 0xC3 + 1, 0xA9 + 1, EOW]
    assert word_to_char_ids("日")[1:4] == [b + 1 for b in "日".encode()]


def test_long_words_are_truncated_to_48_bytes():
    ids = word_to_char_ids("x" * 100)
    assert len(ids) == 50
    assert ids[0] == BOW and ids[-1] == EOW
    assert ids[1:49] == [ord("x") + 1] * 48
    assert word_to_char_ids("x" * 48) == ids  # 48 bytes fit exactly


def test_no_word_uses_id_zero():
    for word in ["a", "<S>", "</S>", "ÿ" * 30, "\x00"]:
        assert min(word_to_char_ids(word)) >= 1
    assert max(word_to_char_ids("\xff")) <= ec.N_CHAR_IDS - 1


def test_batch_pads_missing_words_with_zero_rows():
    ids = batch_to_char_ids([["a", "b", "c"], ["d"]], add_bos_eos=True)
    assert ids.shape == (2, 5, 50) and ids.dtype == torch.long
    assert ids[0, 0].tolist() == word_to_char_ids("<S>")
    assert ids[0, 4].tolist() == word_to_char_ids("</S>")
    assert ids[1, 2].tolist() == word_to_char_ids("</S>")
    assert (ids[1, 3:] == 0).all()
    assert char_ids_mask(ids).tolist() == [[True] * 5, [True, True, True, False, False]]


def test_batch_without_markers_and_empty_sentences():
    ids = batch_to_char_ids([["a", "b"], []], add_bos_eos=False)
    assert ids.shape == (2, 2, 50)
    assert ids[0, 1].tolist() == word_to_char_ids("b")
    assert (ids[1] == 0).all()
    assert batch_to_char_ids([], add_bos_eos=False).shape == (0, 0, 50)


def test_spec_json_round_trip_and_strictness():
    spec = CharIdSpec()
    assert spec.n_char_ids == 262
    assert CharIdSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    with pytest.raises(ValueError, match="max_wordlength"):
        CharIdSpec.from_dict({**spec.to_dict(), "max_wordlength": 50})
    with pytest.raises(ValueError, match="padding_char"):
        CharIdSpec(padding_char=100)


def test_spec_changes_the_encoding():
    short = CharIdSpec(max_word_length=6)
    assert word_to_char_ids("abcdefgh", short) == [BOW, *[ord(c) + 1 for c in "abcd"], EOW]
