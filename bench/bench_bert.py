"""Pretraining throughput: ctxrep's BertForPreTraining vs transformers.BertForPreTraining.

One process, same configuration, same initial weights, same masked batch, same AdamW; the two
models alternate (order swapped every repeat) so machine noise hits both. A step is forward +
backward + optimiser step. Reports median tokens/s per model, the median of per-repeat ratios,
and model FLOP utilisation: analytic model FLOPs/s (ctxrep.models.bert.flops_per_token, the same
useful-work count for both) over the peak fp32 matmul FLOP/s measured in this run.

    python bench/bench_bert.py                 # mini, T=128, B=32, V=30522, CPU
    python bench/bench_bert.py --repeats 7 --json bench_bert.json
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from contextlib import nullcontext

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

from ctxrep.io import write_json  # noqa: E402
from ctxrep.models.bert import BertConfig, BertForPreTraining, flops_per_token  # noqa: E402
from ctxrep.models.bert_hf import hf_config_dict, to_hf_state_dict  # noqa: E402
from ctxrep.pretraining.bert_data import SpecialTokens, mask_tokens  # noqa: E402
from ctxrep.training.optim import decay_groups  # noqa: E402
from mfu import peak_matmul_flops, synchronize  # bench/mfu.py (run as a script)

SPECIAL = SpecialTokens(pad=0, unk=100, cls=101, sep=102, mask=103)  # bert-base-uncased's layout


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=1024)
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--mlm-prob", type=float, default=0.15)
    p.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout (BERT: 0.1)")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds; each times both models")
    p.add_argument("--steps", type=int, default=4, help="optimiser steps per model per round")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model before the rounds")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast for both models")
    p.add_argument("--compile", action="store_true", help="torch.compile both models")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", dest="json_path", default=None, help="write results to this JSON file")
    return p.parse_args()


def make_batch(args, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Full-length [CLS] A [SEP] B [SEP] rows of random non-special tokens, 15% masked."""
    batch, length = args.batch_size, args.seq_len
    first_regular = max(SPECIAL.ids) + 1
    input_ids = torch.randint(first_regular, args.vocab_size, (batch, length), generator=generator)
    split = length // 2
    input_ids[:, 0], input_ids[:, split], input_ids[:, -1] = SPECIAL.cls, SPECIAL.sep, SPECIAL.sep
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, split + 1 :] = 1
    special_mask = torch.isin(input_ids, torch.tensor(SPECIAL.ids))
    masked, labels = mask_tokens(
        input_ids, special_mask, args.vocab_size, SPECIAL.mask, args.mlm_prob, generator, special_ids=SPECIAL.ids
    )
    return {
        "input_ids": masked,
        "token_type_ids": token_type_ids,
        "attention_mask": torch.ones_like(input_ids),
        "labels": labels,
        "next_sentence_label": torch.randint(0, 2, (batch,), generator=generator),
    }


def build_models(args, device: torch.device):
    config = BertConfig(
        vocab_size=args.vocab_size,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.intermediate,
        max_position_embeddings=max(512, args.seq_len),
        hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.dropout,
        pre_layer_norm=False,
    ).validate()
    torch.manual_seed(args.seed)
    ours = BertForPreTraining(config)
    hf_config = {k: v for k, v in hf_config_dict(config, "BertForPreTraining", torch.float32).items() if k != "dtype"}
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**hf_config, attn_implementation="sdpa"))
    # Same starting weights, so both do the same arithmetic on the same numbers.
    missing, unexpected = theirs.load_state_dict(to_hf_state_dict(ours), strict=False)
    assert not unexpected and all("decoder" in name for name in missing), (missing, unexpected)
    assert theirs.config._attn_implementation == "sdpa"
    return config, ours.to(device).train(), theirs.to(device).train()


def make_optimizer(model: torch.nn.Module, device: torch.device) -> torch.optim.Optimizer:
    # Identical for both: the training rule's decay groups, fused AdamW kernel (CPU and CUDA).
    return torch.optim.AdamW(decay_groups(model, 0.01), lr=1e-4, betas=(0.9, 0.999), eps=1e-6, fused=True)


def step_fn(model, optimizer, batch, autocast):
    """One optimiser step as a closure. Both models take the same keyword arguments and return
    MLM + NSP loss in `.loss`."""

    def step():
        with autocast():
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def time_steps(step, steps: int, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    return time.perf_counter() - start


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(args.seed)
    config, ours, theirs = build_models(args, device)
    if args.compile:
        ours, theirs = torch.compile(ours), torch.compile(theirs)
    batch = {k: v.to(device) for k, v in make_batch(args, generator).items()}
    autocast = (
        (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if args.bf16 else nullcontext
    )
    steps = {
        name: step_fn(model, make_optimizer(model, device), batch, autocast)
        for name, model in (("ctxrep", ours), ("transformers", theirs))
    }
    peak = peak_matmul_flops(device)
    for step in steps.values():
        for _ in range(args.warmup):
            step()

    tokens_per_step = args.batch_size * args.seq_len
    rates: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for repeat in range(args.repeats):
        for name in names if repeat % 2 == 0 else names[::-1]:
            elapsed = time_steps(steps[name], args.steps, device)
            rates[name].append(args.steps * tokens_per_step / elapsed)
        print(f"round {repeat + 1}/{args.repeats}: " + "  ".join(f"{n} {rates[n][-1]:,.0f} tok/s" for n in names))
    peak = max(peak, peak_matmul_flops(device))  # best of before and after the rounds

    model_flops = flops_per_token(config, args.seq_len, args.mlm_prob)
    ratios = [a / b for a, b in zip(rates["ctxrep"], rates["transformers"])]
    result = {
        "config": {k: getattr(args, k) for k in vars(args) if k != "json_path"},
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''} threads={torch.get_num_threads()}".strip(),
        "peak_matmul_flops": peak,
        "model_flops_per_token": model_flops,
        "tokens_per_s": {n: statistics.median(r) for n, r in rates.items()},
        "tokens_per_s_all": rates,
        "mfu": {n: statistics.median(r) * model_flops / peak for n, r in rates.items()},
        "speedup_median": statistics.median(ratios),
    }
    print(f"\npeak fp32 matmul: {peak / 1e9:,.1f} GFLOP/s; model FLOPs/token: {model_flops / 1e6:,.1f} M")
    for name in names:
        print(f"{name:>13}: {result['tokens_per_s'][name]:>9,.0f} tokens/s   MFU {result['mfu'][name]:6.1%}")
    print(f"ctxrep / transformers (median of per-round ratios): {result['speedup_median']:.2f}x")
    if args.json_path:
        write_json(args.json_path, result)


if __name__ == "__main__":
    main()
