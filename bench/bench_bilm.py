"""biLM pretraining throughput: tokens/s and model FLOP utilisation of ctxrep's BiLM.

A step is forward + backward + AdamW step on one batch of B sentences of T tokens (every
position a real word; <S>/</S> count as tokens). Model FLOP utilisation = analytic model FLOPs/s
(ctxrep.models.bilm.flops_per_token x tokens/s) over the peak matmul FLOP/s measured in this run
(a large square matmul loop, fp32, or bf16 with --bf16).

    python bench/bench_bilm.py                        # CPU default profile sizes
    python bench/bench_bilm.py --cell-clip 3 --softmax sampled --json bench_bilm.json
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from contextlib import nullcontext

import torch

from ctxrep.io import write_json
from ctxrep.models.bilm import BiLM, BiLMConfig, flops_per_token
from ctxrep.text.elmo_chars import batch_to_char_ids
from mfu import peak_matmul_flops, synchronize  # bench/mfu.py (run as a script)


def parse_filters(text: str) -> list[list[int]]:
    """'1:32,2:32,3:64' -> [[1, 32], [2, 32], [3, 64]] (width:n_filters)."""
    return [[int(v) for v in pair.split(":")] for pair in text.split(",")]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--projection-dim", type=int, default=256)
    p.add_argument("--cell-dim", type=int, default=1024)
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--filters", type=parse_filters, default=parse_filters("1:32,2:32,3:64,4:128,5:256"),
                   help="char-CNN filters as width:n pairs (default sums to 512)")
    p.add_argument("--n-highway", type=int, default=1)
    p.add_argument("--cell-clip", type=float, default=None, help="clip cell and projection (explicit LSTM loop)")
    p.add_argument("--vocab-size", type=int, default=20000)
    p.add_argument("--softmax", choices=["full", "sampled"], default="full")
    p.add_argument("--n-negatives", type=int, default=8192)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=20, help="tokens per sentence, <S> and </S> included")
    p.add_argument("--steps", type=int, default=10, help="timed steps per repeat")
    p.add_argument("--repeats", type=int, default=3, help="timed rounds; the median is reported")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (and bf16 peak matmul)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", dest="json_path", default=None, help="write results to this JSON file")
    return p.parse_args()


def make_batch(args, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random lowercase words of 1-12 letters (char ids) and Zipf-distributed target ids."""
    rng = random.Random(args.seed)
    words = args.seq_len - 2
    sentences = [["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(1, 12))) for _ in range(words)]
                 for _ in range(args.batch_size)]
    char_ids = batch_to_char_ids(sentences, add_bos_eos=True)
    generator = torch.Generator().manual_seed(args.seed)
    zipf = 1.0 / torch.arange(1, args.vocab_size + 1, dtype=torch.float64)
    targets = torch.multinomial(zipf, char_ids.shape[0] * char_ids.shape[1], replacement=True, generator=generator)
    mask = torch.ones(char_ids.shape[:2], dtype=torch.bool)
    return char_ids.to(device), targets.view(mask.shape).to(device), mask.to(device)


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    config = BiLMConfig(
        vocab_size=args.vocab_size, filters=args.filters, n_highway=args.n_highway, projection_dim=args.projection_dim,
        cell_dim=args.cell_dim, n_layers=args.n_layers, cell_clip=args.cell_clip, proj_clip=args.cell_clip,
        dropout=args.dropout, softmax=args.softmax, n_negatives=args.n_negatives,
    ).validate()
    model = BiLM(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=device.type == "cuda")
    batch = make_batch(args, device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if args.bf16 else nullcontext()

    def step() -> None:
        with autocast:
            loss = model.lm_loss(*batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    seconds_per_step = []
    for _ in range(args.repeats):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        synchronize(device)
        seconds_per_step.append((time.perf_counter() - start) / args.steps)
    step_seconds = statistics.median(seconds_per_step)

    tokens_per_step = args.batch_size * args.seq_len
    tokens_per_second = tokens_per_step / step_seconds
    model_flops = flops_per_token(config) * tokens_per_second
    peak = peak_matmul_flops(device, torch.bfloat16 if args.bf16 else torch.float32)
    result = {
        "config": config.to_dict(),
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "device": str(device),
        "dtype": "bf16-autocast" if args.bf16 else "fp32",
        "threads": torch.get_num_threads(),
        "platform": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "parameters": model.num_parameters(),
        "parameters_without_softmax": model.num_parameters(include_softmax=False),
        "train_flops_per_token": flops_per_token(config),
        "step_ms": 1e3 * step_seconds,
        "step_ms_per_repeat": [1e3 * s for s in seconds_per_step],
        "tokens_per_second": tokens_per_second,
        "model_flops_per_second": model_flops,
        "peak_matmul_flops_per_second": peak,
        "mfu": model_flops / peak,
    }
    rows = [
        ("model", f"P={config.projection_dim} C={config.cell_dim} L={config.n_layers} "
                  f"filters={config.n_filters} V={config.vocab_size} {config.softmax} softmax"
                  + (f" clip={args.cell_clip}" if args.cell_clip else "")),
        ("parameters", f"{result['parameters'] / 1e6:.2f}M ({result['parameters_without_softmax'] / 1e6:.2f}M without softmax)"),
        ("batch", f"{args.batch_size} x {args.seq_len} tokens, {result['dtype']}, {device}, {result['threads']} threads"),
        ("train FLOPs / token", f"{result['train_flops_per_token'] / 1e6:.1f} MFLOP"),
        ("step", f"{result['step_ms']:.1f} ms (median of {args.repeats} x {args.steps} steps)"),
        ("throughput", f"{tokens_per_second:,.0f} tokens/s"),
        ("model FLOP/s", f"{model_flops / 1e9:.1f} GFLOP/s"),
        ("peak matmul FLOP/s", f"{peak / 1e9:.1f} GFLOP/s"),
        ("MFU", f"{100 * result['mfu']:.1f}%"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if args.json_path:
        write_json(args.json_path, result)


if __name__ == "__main__":
    main()
