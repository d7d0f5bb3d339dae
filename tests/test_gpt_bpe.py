"""The ``gpt_bpe`` family (issue 59, item 3): GPT's left-to-right decoder with its own byte-level
BPE, one module of ctxrep.families. Its tokenizer is learned the same in every process, covers
any text, and its model folder is read as any left-to-right LM's: by the featurizer, by
fine-tuning and by ``transformers``."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ctxrep.families import family
from ctxrep.models.bert import BertForPreTraining
from ctxrep.models.bert_hf import save_pretrained
from tests.conftest import make_sentence
from tests.test_bert import randomize_, tiny_config

VOCAB = 300


class Corpus:
    """What the tokenizer hook reads of a TokenizedCorpus: its params and training sentences."""

    def __init__(self, n: int = 400):
        rng = random.Random(0)
        self.sentences = [make_sentence(rng) for _ in range(n)]
        self.meta = {"params": {"lowercase": True, "wordpiece_vocab_size": VOCAB}}

    def documents(self, split, columns=None):
        assert split == "train" and columns == ["sentences"]
        yield {"sentences": self.sentences}


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("bpe")
    family("gpt_bpe").tokenizer(Corpus(), out)
    return out


def test_the_bpe_is_learned_the_same_in_another_process_and_reads_any_text(bpe_dir, tmp_path):
    code = ("import sys\nfrom pathlib import Path\nfrom ctxrep.families import family\n"
            "from tests.test_gpt_bpe import Corpus\n"
            "family('gpt_bpe').tokenizer(Corpus(), Path(sys.argv[1]))\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True,
                   cwd=Path(__file__).resolve().parents[1])
    assert (tmp_path / "tokenizer.json").read_bytes() == (bpe_dir / "tokenizer.json").read_bytes()
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(bpe_dir / "tokenizer.json"))
    assert tok.get_vocab_size() == VOCAB
    assert [tok.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == \
        list(range(5))
    unseen = "Naïve façades in 東京 — 42°!"
    enc = tok.encode(unseen)
    assert tok.token_to_id("[UNK]") not in enc.ids  # bytes: nothing is out of vocabulary
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    assert tok.decode(enc.ids).strip() == unseen.lower()
    words = ["The", "cat", "sat"]
    enc = tok.encode(words, is_pretokenized=True)  # as the task kinds encode a tagged sentence
    assert [enc.word_ids[i] for i in range(len(enc.ids))][0] is None
    assert sorted({w for w in enc.word_ids if w is not None}) == [0, 1, 2]
    spans = [(a, b) for (a, b), w in zip(enc.offsets, enc.word_ids) if w == 1 and b > a]
    assert (spans[0][0], spans[-1][1]) == (0, 3)  # offsets within the word, its space trimmed


@torch.no_grad()
def test_its_model_folder_is_read_by_the_featurizer_fine_tuning_and_transformers(bpe_dir,
                                                                                  tmp_path):
    from transformers import AutoTokenizer

    from ctxrep.kinds.interface import sequence_ends
    from ctxrep.transfer.extract import BertFeaturizer
    from ctxrep.transfer.finetune import load_tokenizer

    torch.manual_seed(0)
    model = randomize_(BertForPreTraining(tiny_config(vocab_size=VOCAB, is_decoder=True)).eval())
    save_pretrained(model, tmp_path, tokenizer_dir=bpe_dir)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["model_max_length"] == model.config.max_position_embeddings
    assert AutoTokenizer.from_pretrained(str(tmp_path)).tokenize("the cat")[0] == "Ġthe"
    tokenizer = load_tokenizer(tmp_path)
    assert sequence_ends(tokenizer) == (tokenizer.token_to_id("[CLS]"),
                                        tokenizer.token_to_id("[SEP]"))
    featurize = BertFeaturizer(tmp_path, torch.device("cpu"), "mean", 64)
    sentences = [["The", "zyxwv", "sat"], ["a"]]
    features = featurize(sentences)
    assert [f.shape for f in features] == [(model.config.num_hidden_layers + 1, 3,
                                            model.config.hidden_size),
                                           (model.config.num_hidden_layers + 1, 1,
                                            model.config.hidden_size)]
    assert featurize.truncated_words == 0
