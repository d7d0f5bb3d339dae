"""Screen BERT pretraining recipes in one process: held-out masked-token accuracy against
training seconds.

The first pass before a recipe goes into a profile (issue 45: our own BERT off the unigram
plateau). It trains a BERT with the shared loop on an already tokenized corpus (``dvc repro
tokenize`` first) and, every ``--eval-every`` steps, scores one fixed held-out set for every
recipe: ``--eval-instances`` instances of 128 tokens from the held-out documents, 15 % of their
tokens masked with BERT's 80/10/10 rule and fixed seeds, whatever the recipe trains with (so a
recipe with 40 % masks is judged on the same positions as the others; ``--eval-seq-len`` sets
their length, 128 unless a recipe trains shorter sequences).
Appends one JSON line per recipe (its values, tokens/s, the timed curve) to ``--out``. Nothing
it writes is a DVC output; time one recipe at a time, each with its own thread count.

    python bench/screen_bert_recipes.py --name mini-base --corpus data/tokenized --steps 2000

Levers besides the params of ``pretrain_bert``: ``--position-init sinusoidal`` starts the
learned absolute position table at Vaswani et al.'s sinusoids (scaled to the embeddings'
std), a locality prior that a randomly initialised table has to learn first.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import torch

from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.models.bert import BertConfig, BertForPreTraining
from ctxrep.pretraining.bert_objective import BertObjective, load_documents
from ctxrep.training import loop


def sinusoids(positions: int, dim: int) -> torch.Tensor:
    """PE[t, 2i] = sin(t / 10000^(2i/d)), PE[t, 2i+1] = cos(...)."""
    t = torch.arange(positions, dtype=torch.float32)[:, None]
    freq = torch.exp(-torch.arange(0, dim, 2, dtype=torch.float32) / dim * torch.log(torch.tensor(10000.0)))
    table = torch.zeros(positions, dim)
    table[:, 0::2], table[:, 1::2] = torch.sin(t * freq), torch.cos(t * freq)
    return table


class ScreenObjective:
    """Trains with one recipe's objective, evaluates with the shared reference held-out set."""

    def __init__(self, train: BertObjective, reference: BertObjective):
        self._train, self._reference = train, reference

    def __getattr__(self, name):
        return getattr(self._train, name)

    def evaluate(self) -> dict:
        """The stage's held-out metrics on the shared reference set; ``val_acc_at_mask`` (the
        key this bench's results use) is the stage's ``val_mlm_acc_at_mask``."""
        metrics = self._reference.evaluate()
        return {**metrics, "val_acc_at_mask": metrics["val_mlm_acc_at_mask"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True)
    p.add_argument("--corpus", default="data/tokenized")
    p.add_argument("--size", default="mini")
    p.add_argument("--pre-ln", action="store_true")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--mlm-prob", type=float, default=0.15)
    p.add_argument("--no-nsp", action="store_true")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--warmup-fraction", type=float, default=0.1)
    p.add_argument("--schedule", default="linear")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--position-init", choices=["normal", "sinusoidal"], default="normal")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-instances", type=int, default=500)
    p.add_argument("--eval-seq-len", type=int, default=128, help="held-out instance length "
                   "(at most the recipe's last max_seq_len: longer positions were never trained)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("bench/results/bert_recipes.jsonl"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    corpus = TokenizedCorpus(args.corpus)
    vocab = corpus.wordpiece_tokenizer().get_vocab()
    params = SimpleNamespace(
        size=args.size, max_position_embeddings=512, dropout=0.0, pre_layer_norm=args.pre_ln,
        max_seq_len=args.max_seq_len, short_seq_prob=0.1, mlm_prob=args.mlm_prob,
        whole_word=False, nsp=not args.no_nsp, eval_instances=args.eval_instances,
        batch_size=args.batch_size, seed=0)
    reference = replace_ns(params, max_seq_len=args.eval_seq_len, mlm_prob=0.15, nsp=False,
                           batch_size=64)
    config = BertConfig.from_params(params, vocab_size=len(vocab), pad_token_id=vocab["[PAD]"])
    torch.manual_seed(0)
    model = BertForPreTraining(config)
    if args.position_init == "sinusoidal":
        table = model.bert.embeddings.position.weight
        with torch.no_grad():
            table.copy_(sinusoids(*table.shape) * config.initializer_range / 0.7071)
    train_docs, heldout_docs = load_documents(corpus, "train"), load_documents(corpus, "validation")
    device = torch.device("cpu")
    objective = ScreenObjective(
        BertObjective(model, train_docs, heldout_docs, vocab, params, device),
        BertObjective(model, train_docs, heldout_docs, vocab, reference, device))
    cfg = loop.LoopConfig(steps=args.steps, lr=args.lr, optimizer="adamw",
                          weight_decay=args.weight_decay, warmup_fraction=args.warmup_fraction,
                          schedule=args.schedule, grad_clip=1.0, grad_accum=1,
                          eval_every=args.eval_every, checkpoint_every=0, log_every=10**9, seed=0,
                          compile=False, precision=args.precision)
    with tempfile.TemporaryDirectory() as checkpoints:
        result = loop.train(objective, cfg, Path(checkpoints), desc=args.name)
    line = {"name": args.name, "args": {k: v for k, v in vars(args).items() if k != "out"},
            "tokens_per_s": result.train_tokens / result.train_seconds,
            "train_tokens": result.train_tokens,
            "curve": loop.heldout_curve(result)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as f:
        f.write(json.dumps(line) + "\n")
    print(json.dumps({"name": args.name, "tokens_per_s": round(line["tokens_per_s"]),
                      "curve": [(c["step"], round(c["train_s"]), round(c["val_mlm_acc"], 4),
                                 round(c["val_acc_at_mask"], 4)) for c in line["curve"]]}))


def replace_ns(ns: SimpleNamespace, **changes) -> SimpleNamespace:
    return SimpleNamespace(**{**vars(ns), **changes})


if __name__ == "__main__":
    main()
