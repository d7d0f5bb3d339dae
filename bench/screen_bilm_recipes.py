"""Screen biLM pretraining recipes in one process: held-out perplexity against training seconds.

A quick first pass before the queued DVC experiments that settle a recipe (README "The biLM's
pretraining recipe"): it trains the default profile's biLM with the shared loop on an
already tokenized corpus (``dvc repro tokenize`` first), evaluates on the first
``--eval-sentences`` held-out sentences every ``--eval-every`` steps and appends one JSON line
per recipe (its values, tokens/s and the timed curve) to ``--out``. Nothing it writes is a DVC
output; time one recipe at a time on an otherwise idle machine.

    python bench/screen_bilm_recipes.py --name b16 --batch-size 16 --lr 0.005 --steps 1200
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.models.bilm import BiLM, BiLMConfig
from ctxrep.pretraining.bilm_objective import BiLMObjective, WordTypes, load_sentences
from ctxrep.training import loop


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True)
    p.add_argument("--corpus", default="data/tokenized")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--warmup-fraction", type=float, default=0.02)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--n-negatives", type=int, default=2048)
    p.add_argument("--cell-dim", type=int, default=512)
    p.add_argument("--projection-dim", type=int, default=128)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--eval-sentences", type=int, default=1000)
    p.add_argument("--out", type=Path, default=Path("bench/results/bilm_recipes.jsonl"))
    args = p.parse_args()

    corpus = TokenizedCorpus(args.corpus)
    vocab, _ = corpus.word_vocab()
    config = BiLMConfig(vocab_size=len(vocab), projection_dim=args.projection_dim, cell_dim=args.cell_dim,
                        n_layers=2, filters=[[1, 32], [2, 32], [3, 64], [4, 64], [5, 64]], n_highway=1,
                        dropout=args.dropout, softmax="sampled", n_negatives=args.n_negatives,
                        char_embed_dim=16, activation="relu", cell_clip=None, proj_clip=None)
    torch.manual_seed(0)
    model = BiLM(config)
    types = WordTypes(vocab)
    train = load_sentences(corpus, "train", types)
    heldout = load_sentences(corpus, "validation", types, max_sentences=args.eval_sentences)
    chars, targets = types.tables()
    objective = BiLMObjective(model, train, heldout, chars, targets, args.batch_size, 0, torch.device("cpu"))
    cfg = loop.LoopConfig(steps=args.steps, lr=args.lr, optimizer="adamw", weight_decay=0.0,
                          warmup_fraction=args.warmup_fraction, schedule="linear", grad_clip=10.0,
                          grad_accum=1, eval_every=args.eval_every, checkpoint_every=0,
                          log_every=10**9, seed=0, compile=False,
                          precision="fp32")
    with tempfile.TemporaryDirectory() as checkpoints:
        result = loop.train(objective, cfg, Path(checkpoints), desc=args.name)
    line = {"name": args.name, "args": {k: v for k, v in vars(args).items() if k != "out"},
            "tokens_per_s": result.train_tokens / result.train_seconds,
            "curve": loop.heldout_curve(result)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as f:
        f.write(json.dumps(line) + "\n")
    print(json.dumps({"name": args.name, "curve": [(c["step"], c["train_s"], round(c["val_ppl"], 1))
                                                   for c in line["curve"]]}))


if __name__ == "__main__":
    main()
