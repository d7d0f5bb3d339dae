"""``ctxrep perplexity MODEL TEXTFILE``: how well a saved model predicts a plain text.

    ctxrep perplexity data/models/bilm notes.txt            # biLM: exact forward/backward perplexity
    ctxrep perplexity data/models/bert notes.txt --json out.json   # BERT: masked pseudo-perplexity

The text is split as the ``tokenize`` stage splits the corpus (:func:`ctxrep.text.segment.
split_sentences`, then :func:`~ctxrep.text.segment.word_tokenize` for the biLM's words; BERT
reads each sentence with its own WordPiece tokenizer), so words match the biLM's vocabulary.
Unlike the stage, no sentence is dropped for being short or cut for being long.

**biLM** (a folder ``Elmo.save_pretrained`` writes: ``char_spec.json`` beside ``config.json``,
``vocab.txt``, ``model.safetensors``). Each sentence is wrapped in ``<S> ... </S>``; the forward
LM predicts every word and ``</S>``, the backward LM every word and ``<S>``, each with the exact
softmax over the model's whole vocabulary:

    ppl_fwd = exp(NLL_fwd / N),  ppl_bwd = exp(NLL_bwd / N),  N = words + sentences
    ppl     = exp((NLL_fwd / N + NLL_bwd / N) / 2)           (the pipeline's ``val_ppl``)

computed by the pipeline's own held-out evaluation, :meth:`ctxrep.pretraining.bilm_objective.
BiLMObjective.evaluate`, on the text's sentences. A word outside the vocabulary still feeds its
characters to the char-CNN, and is scored as the model's ``<UNK>`` (the probability of "some
out-of-vocabulary word"), as in pretraining; ``oov_rate`` says how many words that was. Perplexity
is therefore only comparable between models with the same vocabulary.

The unigram reference, ``exp`` of the mean NLL of the same predictions under the add-one smoothed
unigram distribution of the model's training corpus (the pipeline's ``unigram_ppl``), needs that
corpus's word counts: a model folder carries them when it holds ``bilm_vocab.tsv``
(``word<TAB>count``, as ``data/tokenized/`` writes it, in the model's vocabulary order), as
``pretrain_bilm`` writes beside ``data/models/bilm``; a folder without one (a model saved by
``Elmo.save_pretrained`` alone) reports the reference as not available.

The text is scored as it is: it is not lower-cased to match a model trained on lower-cased text
(``tokenize.lowercase``), and a placeholder such as PTB's ``<unk>`` is not the model's
``<UNK>``: the word tokenizer splits it into ``<``, ``unk``, ``>``. Prepare such a text first
(lower-case it; replace ``<unk>`` with a word the vocabulary lacks): ``oov_rate`` shows what
the model did not know.

**BERT** (a Hugging Face folder with ``config.json`` of ``model_type`` bert and ``tokenizer.json``,
as ``pretrain_bert`` and ``import-bert`` write). Each sentence is ``[CLS] pieces [SEP]``; each
piece w_i in turn is replaced by ``[MASK]`` and scored from the rest (Salazar et al. 2020):

    PPPL = exp(-(1/N) sum_i log p(w_i | s without w_i)),   accuracy = share of argmax == w_i

``[UNK]`` pieces are scored as the token ``[UNK]``; ``oov_rate`` is their share. ``--max-tokens``
bounds the pieces scored (sentences in order; the last one partly, its full text still context).
A sentence longer than the model's positions is read in consecutive windows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ctxrep.errors import InputError
from ctxrep.families import bert, bilm

DEFAULT_MAX_TOKENS = 2000
BILM, BERT = bilm.FAMILY.name, bert.FAMILY.name   # what a folder is (detect_kind)
UNIGRAM_COUNTS_FILE = "bilm_vocab.tsv"
NO_UNIGRAM = "unigram reference: not available (the model does not store counts)"


# ----------------------------------------------------------------------------------- inputs

def detect_kind(model_dir: Path) -> str:
    """``"bilm"`` or ``"bert"`` from the folder's files; an :class:`InputError` otherwise."""
    model_dir = Path(model_dir)
    if not model_dir.exists():
        raise InputError(f"{model_dir}: no such model folder")
    if not model_dir.is_dir():
        raise InputError(f"{model_dir}: not a folder (MODEL is a saved biLM or BERT folder)")
    if (model_dir / "options.json").is_file() and not (model_dir / "config.json").is_file():
        raise InputError(f"{model_dir}: published bilm-tf weights (options.json) have no output "
                         f"softmax and no vocabulary; perplexity needs the LM head")
    if (model_dir / "char_spec.json").is_file():
        return BILM
    config = model_dir / "config.json"
    if config.is_file():
        from transformers import BertConfig

        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InputError(f"{config}: not readable JSON ({e})") from e
        archs = data.get("architectures") or []
        if data.get("model_type") == BertConfig.model_type or any(str(a).startswith("Bert") for a in archs):
            return BERT
    raise InputError(f"{model_dir}: neither a saved biLM (char_spec.json, config.json, vocab.txt, "
                     f"model.safetensors) nor a BERT folder (config.json of model_type bert, "
                     f"tokenizer.json)")


def read_sentences(text_path: Path) -> list[str]:
    """The text's sentences, split as the tokenize stage splits the corpus."""
    from ctxrep.text.segment import split_sentences

    text_path = Path(text_path)
    if not text_path.is_file():
        raise InputError(f"{text_path}: no such text file")
    try:
        text = text_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{text_path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\t\n\r\f")
    if controls:
        raise InputError(f"{text_path}: holds {controls} control character(s) (NUL and the "
                         f"like): not plain text")
    for number, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_LINE_CHARS:
            raise InputError(f"{text_path}:{number}: a line of {len(line):,} characters (at most "
                             f"{MAX_LINE_CHARS:,}): not prose; break the text into lines")
    sentences = split_sentences(text)
    if not sentences:
        raise InputError(f"{text_path}: the text is empty (no sentence to score)")
    longest = max(sentences, key=len)
    if len(longest) > MAX_SENTENCE_CHARS:
        raise InputError(f"{text_path}: a sentence of {len(longest):,} characters (at most "
                         f"{MAX_SENTENCE_CHARS:,}; it starts {longest[:40]!r}): the sentence "
                         f"splitter found no sentence end in it; break the text into sentences")
    return sentences


# Bounds on the input: a biLM reads a sentence whole, so one unbounded "sentence" (a file with
# no sentence ends) would grow memory without limit.
MAX_LINE_CHARS = 100_000
MAX_SENTENCE_CHARS = 20_000


# ------------------------------------------------------------------------------------- biLM

def _load_bilm(model_dir: Path):
    from ctxrep.models.elmo import Elmo

    try:
        elmo = Elmo.from_pretrained(model_dir)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(f"{model_dir}: not a loadable biLM folder ({e})") from e
    if elmo.bilm.softmax is None or not elmo.vocab:
        raise InputError(f"{model_dir}: this biLM has no output softmax and no vocabulary (imported "
                         f"bilm-tf/AllenNLP weights are features only); perplexity needs the LM head: "
                         f"use a biLM trained by the pretrain_bilm stage")
    return elmo


def _unigram_reference(model_dir: Path, vocab: list[str], held_targets, n_sentences: int) -> float | None:
    """The pipeline's ``unigram_ppl`` (:func:`ctxrep.pretraining.bilm_objective.
    unigram_perplexity`) from stored training counts instead of the training sentences, or None
    when the folder stores none. Stored counts are the same numbers: ``<UNK>`` holds every OOV
    occurrence and ``<S>``/``</S>`` the number of sentences."""
    path = Path(model_dir) / UNIGRAM_COUNTS_FILE
    if not path.is_file():
        return None
    import torch

    from ctxrep.text.vocab import BOS, EOS, load_word_vocab

    try:
        words, counts = load_word_vocab(path)
    except ValueError as e:
        raise InputError(str(e)) from e
    if words != vocab:
        raise InputError(f"{path}: its words are not the model's vocab.txt, in order")
    counts = torch.tensor(counts, dtype=torch.float64)
    logp = torch.log((counts + 1) / (counts.sum() + len(vocab)))
    bos, eos = vocab.index(BOS), vocab.index(EOS)
    nll = -(logp[held_targets].sum() + 0.5 * n_sentences * (logp[eos] + logp[bos]))
    return float(torch.exp(nll / (held_targets.numel() + n_sentences)))


def bilm_perplexity(model_dir: Path, sentences: list[str], max_tokens: int = 0,
                    batch_size: int = 32) -> dict:
    """Exact forward, backward and mean perplexity of a saved biLM on ``sentences`` (raw text;
    whole sentences up to ``max_tokens`` words, 0 = all). See the module docstring."""
    import numpy as np
    import torch

    from ctxrep.pretraining.bilm_objective import BiLMObjective, SentenceArrays, WordTypes
    from ctxrep.text.elmo_chars import ELMO_CHAR_SPEC, word_to_char_ids
    from ctxrep.text.segment import word_tokenize
    from ctxrep.text.vocab import UNK

    model_dir = Path(model_dir)
    elmo = _load_bilm(model_dir)
    if UNK not in elmo.vocab:
        raise InputError(f"{model_dir}/vocab.txt: has no {UNK} word to score unknown words with")
    words = []
    for sentence in sentences:
        words.append(word_tokenize(sentence))
        if max_tokens and sum(map(len, words)) >= max_tokens:
            break
    types = WordTypes(elmo.vocab)
    ids, offsets = [], [0]
    for w in words:
        ids.extend(types.ids(w))
        offsets.append(len(ids))
    held = SentenceArrays(np.asarray(ids, dtype=np.int32), np.asarray(offsets, dtype=np.int64))
    empty = SentenceArrays(np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64))
    chars, targets = types.tables()
    if elmo.char_spec != ELMO_CHAR_SPEC:  # tables() encodes with ELMo's scheme; use the model's
        ordered = sorted(types.types, key=types.types.get)
        chars = torch.tensor(np.array([word_to_char_ids(w, elmo.char_spec) for w in ordered], dtype=np.int16))
    objective = BiLMObjective(elmo.bilm, empty, held, chars, targets, batch_size, seed=0,
                              device=torch.device("cpu"))
    ev = objective.evaluate()

    held_targets = targets[torch.from_numpy(held.type_ids.astype(np.int64))]
    n_words = int(held_targets.numel())
    oov = int((held_targets == elmo.vocab.index(UNK)).sum())
    unigram = _unigram_reference(model_dir, elmo.vocab, held_targets, len(held))
    return {
        "kind": BILM, "sentences": len(held), "sentences_total": len(sentences),
        "tokens": n_words, "predictions_per_direction": n_words + len(held),
        "vocab_size": len(elmo.vocab), "oov_tokens": oov, "oov_rate": oov / n_words if n_words else 0.0,
        "oov_scored_as": UNK,
        "perplexity_forward": ev["val_ppl_forward"], "perplexity_backward": ev["val_ppl_backward"],
        "perplexity_mean": ev["val_ppl"],
        "unigram_ppl": unigram, "unigram_note": None if unigram is not None else NO_UNIGRAM,
    }


# ------------------------------------------------------------------------------------- BERT

def _load_bert(model_dir: Path):
    from tokenizers import Tokenizer

    from ctxrep.models.bert_hf import load_pretrained_parts
    from ctxrep.models.bert_import import has_mlm_head

    if not has_mlm_head(model_dir):
        raise InputError(f"{model_dir}: an encoder without an MLM head (saved as BertModel); "
                         f"pseudo-perplexity needs an MLM head: use a BertForPreTraining / "
                         f"BertForMaskedLM folder such as data/models/bert")
    if not (model_dir / "tokenizer.json").is_file():
        raise InputError(f"{model_dir}/tokenizer.json: missing; the BERT folder needs its tokenizer")
    try:
        model, fresh = load_pretrained_parts(model_dir)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(f"{model_dir}: not a loadable BERT folder ({e})") from e
    if any(name.startswith("mlm.") for name in fresh):
        raise InputError(f"{model_dir}: the checkpoint has no pretrained MLM head; pseudo-perplexity "
                         f"needs an MLM head")
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    specials = {t: tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[MASK]", "[UNK]")}
    missing = [t for t, i in specials.items() if i is None]
    if missing:
        raise InputError(f"{model_dir}/tokenizer.json: lacks {missing}")
    return model.float().eval(), tokenizer, specials


def masked_token_scores(model, input_ids: list[int], positions: list[int], mask_id: int,
                        batch_size: int = 64):
    """For each position p of the sequence ``input_ids`` (specials included): the NLL of
    ``input_ids[p]`` with p replaced by ``mask_id`` and everything else visible, and whether the
    MLM head's argmax is that token. One masked copy of the sequence per position."""
    import torch

    ids = torch.tensor(input_ids, dtype=torch.long)
    nll, correct = [], []
    word_embeddings = model.bert.embeddings.word.weight
    for start in range(0, len(positions), batch_size):
        pos = torch.tensor(positions[start:start + batch_size], dtype=torch.long)
        rows = torch.arange(len(pos))
        batch = ids.repeat(len(pos), 1)
        batch[rows, pos] = mask_id
        with torch.no_grad():
            hidden = model.bert(batch).last_hidden_state[rows, pos]  # (R, H): the masked positions only
            logp = torch.log_softmax(model.mlm(hidden, word_embeddings).float(), dim=-1)
        target = ids[pos]
        nll.append(-logp[rows, target])
        correct.append(logp.argmax(-1) == target)
    return torch.cat(nll), torch.cat(correct)


def bert_pseudo_perplexity(model_dir: Path, sentences: list[str],
                           max_tokens: int = DEFAULT_MAX_TOKENS, batch_size: int = 64) -> dict:
    """Masked-token pseudo-perplexity and accuracy of a saved BERT on ``sentences`` (at most
    ``max_tokens`` WordPiece positions, 0 = all). See the module docstring."""
    import torch

    model_dir = Path(model_dir)
    model, tokenizer, sp = _load_bert(model_dir)
    window = model.config.max_position_embeddings - 2
    nll, correct = [], []
    scored = total = unk = n_sentences = 0
    for sentence in sentences:
        pieces = tokenizer.encode(sentence, add_special_tokens=False).ids
        total += len(pieces)
        if max_tokens and scored >= max_tokens:
            continue
        n_sentences += 1
        for start in range(0, len(pieces), window):
            chunk = pieces[start:start + window]
            take = len(chunk) if not max_tokens else min(len(chunk), max_tokens - scored)
            if take <= 0:
                break
            seq = [sp["[CLS]"], *chunk, sp["[SEP]"]]
            n, c = masked_token_scores(model, seq, list(range(1, take + 1)), sp["[MASK]"], batch_size)
            nll.append(n)
            correct.append(c)
            unk += sum(1 for t in chunk[:take] if t == sp["[UNK]"])
            scored += take
    if not scored:
        raise InputError("the text has no WordPiece token to score")
    nll, correct = torch.cat(nll).double(), torch.cat(correct)
    return {
        "kind": BERT, "sentences": n_sentences, "sentences_total": len(sentences),
        "tokens": scored, "tokens_total": total, "vocab_size": model.config.vocab_size,
        "oov_tokens": unk, "oov_rate": unk / scored, "oov_scored_as": "[UNK]",
        "pseudo_perplexity": float(torch.exp(nll.mean())),
        "mlm_accuracy": float(correct.double().mean()),
        "unigram_ppl": None,
    }


# ------------------------------------------------------------------------------- the command

def score(model_dir: Path, text_path: Path, max_tokens: int | None = None) -> dict:
    """The numbers ``ctxrep perplexity`` prints; ``max_tokens`` None: the default per kind
    (biLM: all words; BERT: :data:`DEFAULT_MAX_TOKENS` pieces)."""
    model_dir, text_path = Path(model_dir), Path(text_path)
    model = detect_kind(model_dir)
    sentences = read_sentences(text_path)
    if max_tokens is not None and max_tokens < 0:
        raise InputError(f"--max-tokens must be >= 0 (0 = no limit), got {max_tokens}")
    if model == BILM:
        result = bilm_perplexity(model_dir, sentences, max_tokens or 0)
    else:
        result = bert_pseudo_perplexity(model_dir, sentences,
                                        DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens)
    for key, value in result.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{key} is {value}: the model's outputs are not finite")
    return {"model": str(model_dir), "text": str(text_path), **result}


def format_table(r: dict) -> str:
    def num(v):
        return "n/a" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)

    rows = [("model", r["model"]), ("kind", r["kind"]),
            ("sentences", f"{r['sentences']} of {r['sentences_total']}")]
    if r["kind"] == BILM:
        rows += [("words", num(r["tokens"])),
                 ("OOV words", f"{r['oov_rate']:.2%} ({r['oov_tokens']}, scored as {r['oov_scored_as']})"),
                 ("perplexity forward", num(r["perplexity_forward"])),
                 ("perplexity backward", num(r["perplexity_backward"])),
                 ("perplexity mean", num(r["perplexity_mean"]) + "  (exp of the mean NLL of both directions)"),
                 ("unigram reference", num(r["unigram_ppl"]) if r["unigram_ppl"] is not None
                  else "not available (the model does not store counts)")]
    else:
        rows += [("pieces scored", f"{r['tokens']} of {r['tokens_total']}"),
                 ("[UNK] pieces", f"{r['oov_rate']:.2%} ({r['oov_tokens']}, scored as [UNK])"),
                 ("pseudo-perplexity", num(r["pseudo_perplexity"])),
                 ("masked-token accuracy", num(r["mlm_accuracy"]))]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def add_arguments(p) -> None:
    p.add_argument("model", type=Path, help="a saved biLM folder (data/models/bilm) or a BERT folder "
                   "with its MLM head (data/models/bert)")
    p.add_argument("textfile", type=Path, help="plain UTF-8 text")
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help=f"score at most N tokens, 0 = all (default: BERT {DEFAULT_MAX_TOKENS} "
                   f"WordPiece positions; biLM all words, cut at a sentence end)")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers here (JSON)")


def run(a) -> None:
    result = score(a.model, a.textfile, a.max_tokens)
    print(format_table(result))
    if a.json:
        from ctxrep.io import atomic_file

        with atomic_file(a.json) as f:
            f.write(json.dumps(result, indent=2) + "\n")
