"""biLM pretraining throughput: tokens/s and model FLOP utilisation of ctxrep's BiLM, beside a peer.

A step is forward + backward + AdamW step on one batch of B sentences of T tokens (every
position a real word; <S>/</S> count as tokens), words drawn Zipf-distributed from a vocabulary
so that they repeat within a batch as in running text. Model FLOP utilisation (MFU) = analytic
model FLOPs/s (ctxrep.models.bilm.flops_per_token x tokens/s, the char-CNN counted once per
token) over the peak matmul FLOP/s measured in this run (a large square matmul loop, fp32, or
bf16 with --bf16), read before and after every round of timed steps: each round's steps are
divided by the better of the two readings beside it, and the median over rounds is printed,
with the MFU of the median step against the run's best reading beside it (the lower bound).
The peer is the same network with the same weights written in plain ``torch.nn``
(``torch.nn.LSTM`` stacks, the char-CNN run on every token); ctxrep's encoder runs the char-CNN
once per distinct word and only up to the batch's longest word plus the widest filter (the
windows past it copy one that is kept), so it also prints the hardware FLOP utilisation (the
FLOPs actually executed), and its LSTM layers run the C++ kernel of ``ctxrep.models.lstmp_cpu`` on CPU (layer l
of both directions at once, one thread each) where the peer runs ``torch.nn.LSTM``, one layer
after another. Both are timed in one process, their repeats
interleaved. On CPU it also profiles each step and prints the time spent inside matmuls and
convolutions: the hardware FLOP utilisation a step would reach if nothing else took time, the
ceiling at these shapes.

    python bench/bench_bilm.py                        # the default profile's biLM and batch, beside the peer
    python bench/bench_bilm.py --batch-size 64 --dropout 0.1 --json bench/results/bilm-b64.json

Every default is the default profile's value (``conf/config.yaml``: ``pretrain_bilm`` sizes,
batch size, dropout and softmax; ``tokenize.word_vocab_size``), read through
``ctxrep.config.composition.defaults``, so "the default sizes" cannot drift from the pipeline.
"""

from __future__ import annotations

import argparse
import copy
import platform
import random
import statistics
import time
from contextlib import nullcontext

import torch

from ctxrep.config.composition import defaults
from ctxrep.io import write_json
from ctxrep.models.bilm import (BiLM, BiLMConfig, CharCNN, LstmWithProjection, content_width, distinct_rows,
                                flops_per_token, token_encoder_flops)
from ctxrep.text.elmo_chars import batch_to_char_ids
from ctxrep.training.host_memory import keep_freed_memory
from ctxrep.training.optim import make_optimizer
from mfu import matmul_flops, peak_matmul_flops, synchronize  # bench/mfu.py (run as a script)


def parse_filters(text: str) -> list[list[int]]:
    """'1:32,2:32,3:64' -> [[1, 32], [2, 32], [3, 64]] (width:n_filters)."""
    return [[int(v) for v in pair.split(":")] for pair in text.split(",")]


def parse_args() -> argparse.Namespace:
    bilm, vocab_size = defaults("pretrain_bilm"), defaults("tokenize").word_vocab_size
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--projection-dim", type=int, default=bilm.projection_dim)
    p.add_argument("--cell-dim", type=int, default=bilm.cell_dim)
    p.add_argument("--n-layers", type=int, default=bilm.n_layers)
    p.add_argument("--filters", type=parse_filters, default=bilm.filters, help="char-CNN filters as width:n pairs")
    p.add_argument("--n-highway", type=int, default=bilm.n_highway)
    p.add_argument("--cell-clip", type=float, default=bilm.cell_clip,
                   help="clip cell and projection (explicit LSTM loop)")
    p.add_argument("--char-embed-dim", type=int, default=bilm.char_embed_dim)
    p.add_argument("--activation", choices=["relu", "tanh"], default=bilm.activation)
    p.add_argument("--vocab-size", type=int, default=vocab_size)
    p.add_argument("--softmax", choices=["full", "sampled"], default=bilm.softmax)
    p.add_argument("--n-negatives", type=int, default=bilm.n_negatives)
    p.add_argument("--dropout", type=float, default=bilm.dropout)
    p.add_argument("--batch-size", type=int, default=bilm.batch_size)
    p.add_argument("--optimizer", choices=["adamw", "adagrad"], default=bilm.optimizer)
    p.add_argument("--lr", type=float, default=bilm.lr)
    p.add_argument("--weight-decay", type=float, default=bilm.weight_decay)
    p.add_argument("--seq-len", type=int, default=25, help="tokens per sentence, <S> and </S> included")
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
    """Sentences of words drawn like running text: a vocabulary of ``vocab_size`` random
    lowercase words of 1-16 letters, drawn Zipf-distributed (frequency ~ 1 / rank), so words
    repeat within a batch as they do in a corpus; the targets are the words' ranks. A batch's
    longest word then has about 16 letters, so the char-CNN runs over about 23 positions, as it
    does on the default corpus's batches of 16 sentences (23 on average, 26 at the 90th
    percentile, over 2,000 random batches)."""
    rng = random.Random(args.seed)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(1, 16)))
             for _ in range(args.vocab_size)]
    generator = torch.Generator().manual_seed(args.seed)
    zipf = 1.0 / torch.arange(1, args.vocab_size + 1, dtype=torch.float64)
    ranks = torch.multinomial(zipf, args.batch_size * args.seq_len, replacement=True, generator=generator)
    ranks = ranks.view(args.batch_size, args.seq_len)
    sentences = [[vocab[r] for r in row[1:-1].tolist()] for row in ranks]  # <S>, </S> at the ends
    char_ids = batch_to_char_ids(sentences, add_bos_eos=True)
    mask = torch.ones(char_ids.shape[:2], dtype=torch.bool)
    return char_ids.to(device), ranks.to(device), mask.to(device)


class PlainCharCNN(CharCNN):
    """The peer's token encoder: the same char-CNN run on every token, as written in
    ``torch.nn`` with no work shared between occurrences of a word."""

    def forward(self, char_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, T, W = char_ids.shape
        chars = self.char_embedding(char_ids.reshape(B * T, W)).transpose(1, 2)
        features = torch.cat([conv(chars).max(dim=-1).values for conv in self.convs], dim=-1)
        tokens = self.projection(self.highway(self.activation(features)))
        return tokens.view(B, T, -1) * mask.unsqueeze(-1)


class PlainLstmWithProjection(LstmWithProjection):
    """The peer's LSTM layer: ``torch.nn.LSTM(proj_size=P)`` on every device (cuDNN on GPU,
    torch's own time loop on CPU), where ctxrep's layer runs its C++ time loop on CPU."""

    @staticmethod
    def run_together(layers: list[LstmWithProjection], xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [layer.lstm(x)[0] for layer, x in zip(layers, xs)]  # one after the other


# The ops whose self time is matmul or convolution arithmetic (torch.profiler names on CPU).
MATMUL_AND_CONV_OPS = {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm",
                       "aten::mkldnn_convolution", "aten::convolution_backward"}


def matmul_and_conv_ms(step, steps: int = 3) -> float:
    """Milliseconds per step spent inside matmul and convolution kernels (CPU self time,
    torch.profiler), after one unprofiled step."""
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    self_us = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in MATMUL_AND_CONV_OPS)
    return self_us / 1e3 / steps


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
        char_embed_dim=args.char_embed_dim, activation=args.activation,
    ).validate()
    batch = make_batch(args, device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if args.bf16 else nullcontext()
    torch.manual_seed(args.seed)
    model = BiLM(config).to(device).train()
    peer = copy.deepcopy(model)
    peer.token_encoder.__class__ = PlainCharCNN  # same weights, every token encoded
    for stack in (peer.forward_lm, peer.backward_lm):
        for layer in stack.layers:
            layer.__class__ = PlainLstmWithProjection

    if device.type == "cpu":
        keep_freed_memory()  # as the training loop does, for both: freed blocks reused, not faulted in
    # Interleaved repeats, so both see the same machine state; the median of each is reported.
    # the training rule's optimizer (AdamW, fused where torch has the kernel) for both
    optimizers = {name: make_optimizer(m, args.optimizer, args.lr, args.weight_decay)
                  for name, m in (("ctxrep", model), ("peer", peer))}
    models = {"ctxrep": model, "peer": peer}

    def step(name: str) -> None:
        with autocast:
            loss = models[name].lm_loss(*batch).loss
        optimizers[name].zero_grad(set_to_none=True)
        loss.backward()
        optimizers[name].step()

    for name in models:
        for _ in range(args.warmup):
            step(name)
    seconds_per_step = {name: [] for name in models}
    # The peak is read before the first round and after each: a shared machine's speed drifts
    # (readings 126-196 GFLOP/s within an hour here), and steps and peak slow down together. Each
    # round is judged against the better of the two readings beside it (one slow reading cannot
    # flatter it), and the run's best reading against the median step is printed beside that.
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    peak_readings = [peak_matmul_flops(device, dtype, seconds=0.5)]
    for _ in range(args.repeats):
        for name in models:
            synchronize(device)
            start = time.perf_counter()
            for _ in range(args.steps):
                step(name)
            synchronize(device)
            seconds_per_step[name].append((time.perf_counter() - start) / args.steps)
        peak_readings.append(peak_matmul_flops(device, dtype, seconds=0.5))

    tokens_per_step = args.batch_size * args.seq_len
    words, _ = distinct_rows(batch[0].reshape(tokens_per_step, -1))
    distinct = words.shape[0]
    chars_run = content_width(words, max(width for width, _ in config.filters))
    # Training FLOPs of the char-CNN path per token, which ctxrep's encoder spends once per
    # distinct word of the batch rather than once per token, over the positions up to the
    # batch's longest word plus the widest filter rather than all max_chars_per_token.
    char_flops = 3 * token_encoder_flops(config)
    char_flops_run = 3 * token_encoder_flops(config, chars=chars_run)
    peak = max(peak_readings)
    result = {
        "config": config.to_dict(),
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "distinct_words_per_batch": distinct,
        "char_positions_run": chars_run,
        "device": str(device),
        "dtype": "bf16-autocast" if args.bf16 else "fp32",
        "threads": torch.get_num_threads(),
        "platform": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "parameters": model.num_parameters(),
        "parameters_without_softmax": model.num_parameters(include_softmax=False),
        "train_flops_per_token": flops_per_token(config),
        "peak_matmul_flops_per_second": peak,
        "peak_matmul_readings": peak_readings,
    }
    rows = [
        ("model", f"P={config.projection_dim} C={config.cell_dim} L={config.n_layers} "
                  f"filters={config.n_filters} V={config.vocab_size} {config.softmax} softmax"
                  + (f" clip={args.cell_clip}" if args.cell_clip else "")),
        ("parameters", f"{result['parameters'] / 1e6:.2f}M "
                       f"({result['parameters_without_softmax'] / 1e6:.2f}M without softmax)"),
        ("batch", f"{args.batch_size} x {args.seq_len} tokens ({distinct} distinct words, char-CNN run over "
                  f"{chars_run} of {config.max_chars_per_token} positions), {result['dtype']}, "
                  f"{device}, {result['threads']} threads"),
        ("train FLOPs / token", f"{result['train_flops_per_token'] / 1e6:.1f} MFLOP (char-CNN path "
                                f"{char_flops / 1e6:.1f})"),
        ("peak matmul FLOP/s", f"{peak / 1e9:.1f} GFLOP/s (best of {len(peak_readings)} readings, "
                               f"{min(peak_readings) / 1e9:.1f}-{peak / 1e9:.1f}, before and after each "
                               f"round; MFU: each round against the better reading beside it, median)"),
    ]
    beside = [max(before, after) for before, after in zip(peak_readings, peak_readings[1:])]
    for name, label in (("peer", "peer: torch.nn, every token encoded"), ("ctxrep", "ctxrep BiLM")):
        result[name] = {}
        step_seconds = statistics.median(seconds_per_step[name])
        tokens_per_second = tokens_per_step / step_seconds
        model_flops = flops_per_token(config) * tokens_per_second
        model_flops_per_step = flops_per_token(config) * tokens_per_step
        # what the hardware executed: for ctxrep the char-CNN path once per distinct word, cut
        executed_per_step = model_flops_per_step - (
            char_flops * tokens_per_step - char_flops_run * distinct if name == "ctxrep" else 0)
        result[name]["executed_flops_per_step"] = executed_per_step
        mfu = statistics.median(model_flops_per_step / t / p for t, p in zip(seconds_per_step[name], beside))
        hardware = statistics.median(executed_per_step / t / p for t, p in zip(seconds_per_step[name], beside))
        result[name] |= {"step_ms": 1e3 * step_seconds,
                        "step_ms_per_repeat": [1e3 * t for t in seconds_per_step[name]],
                        "tokens_per_second": tokens_per_second, "model_flops_per_second": model_flops,
                        "mfu": mfu, "hardware_flops_utilisation": hardware,
                        "mfu_against_best_peak": model_flops / peak}
        rows += [(label, f"{1e3 * step_seconds:.1f} ms/step, {tokens_per_second:,.0f} tokens/s, "
                         f"MFU {100 * mfu:.1f}% (hardware FLOPs {100 * hardware:.1f}%; against the "
                         f"run's best peak {100 * model_flops / peak:.1f}%)")]
    # The LSTM's time loop runs its matmuls one step at a time on B rows: these shapes, not the
    # peak's square one, bound what that part of the FLOPs can reach. (ctxrep's kernel computes
    # the input and weight-gradient matmuls over all steps at once, at the large shapes.)
    B, P, C = args.batch_size, config.projection_dim, config.cell_dim
    shapes = {"forward: recurrent (B x P) @ (P x 4C)": (B, P, 4 * C),
              "forward: projection (B x C) @ (C x P)": (B, C, P),
              "backward: recurrent (B x 4C) @ (4C x P)": (B, 4 * C, P),
              "backward: projection (B x P) @ (P x C)": (B, P, C)}
    result["lstm_step_matmuls"] = {}
    for label, (m, k, n) in shapes.items():
        rate = matmul_flops(m, k, n, device, dtype)
        result["lstm_step_matmuls"][label] = {"shape": [m, k, n], "flops_per_second": rate, "of_peak": rate / peak}
        rows.append((f"  LSTM step, {label}", f"{rate / 1e9:.1f} GFLOP/s ({100 * rate / peak:.0f}% of peak)"))
    if device.type == "cpu":
        # What the step would reach if only its matmuls and convolutions took time, as they ran in
        # it: the FLOPs executed (ctxrep's cut char-CNN's, not the model's) over their time.
        for name in models:
            kernel_ms = matmul_and_conv_ms(lambda n=name: step(n))
            ceiling = result[name]["executed_flops_per_step"] / (kernel_ms / 1e3) / peak
            result[name].update(matmul_and_conv_ms=kernel_ms, hardware_flops_if_only_matmuls_took_time=ceiling)
            rows.append((f"{name}: matmuls + convolutions", f"{kernel_ms:.1f} ms of the step's "
                         f"{result[name]['step_ms']:.1f}; hardware FLOPs {100 * ceiling:.1f}% if nothing "
                         f"else took time"))
    rows.append(("speed-up over the peer",
                 f"{result['ctxrep']['tokens_per_second'] / result['peer']['tokens_per_second']:.2f}x"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if args.json_path:
        write_json(args.json_path, result)


if __name__ == "__main__":
    main()
