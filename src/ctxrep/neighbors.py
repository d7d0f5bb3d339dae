"""Polysemy, seen through the biLM (Peters et al. 2018, Table 4).

For a word, compare
* its neighbours in the *context-free* token layer (other vocabulary words, by cosine), with
* its neighbours *in context*: for a few sentences using the word, the corpus sentences whose
  occurrence of the word has the closest top-layer biLM vector.

A context-free vector mixes every sense; the contextual one follows the sentence.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.models.elmo import Elmo


@dataclass
class Occurrence:
    words: list[str]
    index: int

    def text(self, mark: bool = True) -> str:
        w = list(self.words)
        if mark:
            w[self.index] = f"**{w[self.index]}**"
        return " ".join(w)


def find_occurrences(corpus: TokenizedCorpus, word: str, limit: int) -> list[Occurrence]:
    """Sentences using ``word`` (case-insensitive), validation split first, then train."""
    found, target = [], word.lower()
    for split in ("validation", "train"):
        for doc in corpus.documents(split, columns=["words"]):
            for words in doc["words"]:
                lowered = [w.lower() for w in words]
                if target in lowered and len(words) <= 60:
                    found.append(Occurrence(words, lowered.index(target)))
                    if len(found) >= limit:
                        return found
    return found


@torch.no_grad()
def token_layer_neighbours(elmo: Elmo, word: str, k: int, words: list[str],
                           candidates: int = 10000) -> list[str]:
    """The ``k`` words among the first ``candidates`` of ``words`` (a vocabulary, specials
    first) whose token-layer vectors are closest to ``word``'s by cosine."""
    vocab = [w for w in words[3:candidates + 3] if w.lower() != word.lower()]
    vectors = []
    for start in range(0, len(vocab), 512):
        out = elmo([[w] for w in vocab[start:start + 512]])
        vectors.append(out.layers[:, 0, 0])
    matrix = F.normalize(torch.cat(vectors), dim=-1)
    query = F.normalize(elmo([[word]]).layers[0, 0, 0], dim=-1)
    top = (matrix @ query).topk(k).indices.tolist()
    return [vocab[i] for i in top]


@torch.no_grad()
def contextual_vectors(elmo: Elmo, occurrences: list[Occurrence], layer: int) -> torch.Tensor:
    rows = []
    for start in range(0, len(occurrences), 64):
        batch = occurrences[start:start + 64]
        out = elmo([o.words for o in batch])
        rows += [out.layers[i, layer, o.index] for i, o in enumerate(batch)]
    return F.normalize(torch.stack(rows), dim=-1)


def neighbours_report(model_dir: Path, corpus_dir: Path, words: list[str], k: int = 3,
                      queries: int = 2, pool: int = 400) -> str:
    """Markdown: for each word, token-layer neighbours and in-context nearest sentences."""
    elmo = Elmo.from_pretrained(model_dir)
    corpus = TokenizedCorpus(corpus_dir)
    # Candidate neighbours: the biLM's own vocabulary; an imported (published) biLM has none,
    # and then the corpus's word vocabulary serves (the char-CNN embeds any word).
    vocab = elmo.vocab or corpus.word_vocab()[0]
    top = elmo.num_output_layers - 1
    lines = ["# Contextual neighbours (biLM)", "",
             f"Top layer ({top}) vs the context-free token layer; corpus sentences from "
             f"`{corpus_dir}`.", ""]
    for word in words:
        occ = find_occurrences(corpus, word, pool)
        lines += [f"## {word}", "",
                  f"Token-layer neighbours: {', '.join(token_layer_neighbours(elmo, word, 8, vocab))}", ""]
        if len(occ) < 2:
            lines += [f"(only {len(occ)} corpus sentence(s) use '{word}': no contextual view)", ""]
            continue
        vectors = contextual_vectors(elmo, occ, top)
        sims = vectors @ vectors.T
        sims.fill_diagonal_(-2.0)
        lines += ["| query sentence | nearest sentences by the top biLM layer |", "|---|---|"]
        for q in range(min(queries, len(occ))):
            nearest = sims[q].topk(min(k, len(occ) - 1)).indices.tolist()
            lines.append(f"| {occ[q].text()} | " + "<br>".join(occ[i].text() for i in nearest) + " |")
        lines.append("")
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--word", action="append", required=True, help="repeat for several words")
    ap.add_argument("--model", type=Path, default=Path("data/models/bilm"))
    ap.add_argument("--corpus", type=Path, default=Path("data/tokenized"))
    ap.add_argument("--k", type=int, default=3, help="nearest sentences per query")
    ap.add_argument("--queries", type=int, default=2, help="query sentences per word")
    ap.add_argument("--out", type=Path, help="also write the markdown here")


def run(a) -> None:  # --model and --corpus are checked by ctxrep.cli.check_arguments
    text = neighbours_report(a.model, a.corpus, a.word, k=a.k, queries=a.queries)
    print(text)
    if a.out:
        from ctxrep.io import atomic_file

        with atomic_file(a.out) as f:
            f.write(text + "\n")

