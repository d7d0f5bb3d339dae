"""Tokenization benchmark: the tokenize stage vs a plain ``datasets.map`` (HF ``run_mlm.py`` style).

Measured in one run, on the same machine, from the real corpus in ``$CTXREP_DATA_MIRROR``:

* WordPiece tokens/s of the tokenize stage's encoding pass (sentence-split documents, ``num_proc``
  processes, Arrow shards) and of ``raw.map(lambda b: tokenizer(b["text"]), batched=True,
  num_proc=...)`` with the *same* trained tokenizer over the same documents;
* the whole stage (segment + train WordPiece + vocab + encode) at 1x and 4x the corpus size,
  with the peak resident memory of the whole process tree (sampled every 20 ms).

    python bench/bench_tokenize.py --docs 800 --num-proc 2 [--json bench/results/tokenize.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        family = [proc, *proc.children(recursive=True)]
    except psutil.Error:  # the child has just exited
        return 0
    for p in family:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_measured(args: list[str]) -> tuple[dict, float, int]:
    """Run a child python; return its JSON line, wall seconds and peak process-tree RSS."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True,
                             stderr=subprocess.PIPE if os.environ.get("BENCH_DEBUG") else subprocess.DEVNULL)
    ps, peak, done = psutil.Process(child.pid), 0, threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(ps))
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, _ = child.communicate()
    done.set()
    t.join()
    if child.returncode != 0:
        raise SystemExit(f"child {args} failed with {child.returncode}")
    return json.loads(out.strip().splitlines()[-1]), time.perf_counter() - start, peak


# ----------------------------------------------------------------------------- child workloads

def child_fetch(n_docs: int, out: str) -> dict:
    from ctxrep.data import registry, sources

    m = sources.fetch(registry.corpus("wikipedia"), "mirror", {}, Path(out), max_rows=n_docs)
    return {"docs": m["rows"]["train"]}


def child_stage(raw: str, out: str, num_proc: int) -> dict:
    from ctxrep.config.composition import defaults
    from ctxrep.data.tokenized import build

    Path(out).mkdir(parents=True)
    meta = build(Path(raw), Path(out), defaults("tokenize", num_proc=num_proc))
    return {"wordpieces": sum(s["wordpieces"] for s in meta["splits"].values())}


def child_encode_ours(tok_dir: str, out: str, num_proc: int) -> dict:
    """Only the encoding pass of the stage, timed inside the child."""
    from ctxrep.data import tokenized as T

    src, segmented = Path(tok_dir), Path(out) / "segmented"
    jobs = []
    for split in T.SPLITS:  # the shards as the encoding pass receives them: no wordpieces yet
        for p in sorted((src / split).glob("*.arrow")):
            T.write_shard(segmented / split / p.name, T.read_shard(p).drop_columns(["wordpieces"]))
            jobs.append((str(segmented / split / p.name), str(Path(out) / split / p.name)))
    start = time.perf_counter()
    n = sum(r["wordpieces"] for r in T.run_pool(T._wordpiece_shard, jobs, num_proc, "encode",
                                                T._load_tokenizer, (str(src / "tokenizer.json"),)))
    return {"wordpieces": n, "seconds": time.perf_counter() - start}


def child_encode_peer(raw: str, tok_dir: str, num_proc: int) -> dict:
    """HF run_mlm.py's approach: datasets.map over documents with a fast tokenizer."""
    import datasets
    from transformers import AutoTokenizer

    datasets.disable_caching()
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    ds = datasets.load_from_disk(str(Path(raw) / "dataset"))["train"]
    start = time.perf_counter()
    enc = ds.map(lambda b: tokenizer(b["text"], add_special_tokens=False,
                                     return_attention_mask=False, return_token_type_ids=False),
                 batched=True, num_proc=num_proc, remove_columns=ds.column_names)
    n = sum(len(x) for x in enc["input_ids"])
    return {"wordpieces": n, "seconds": time.perf_counter() - start}


CHILDREN = {"fetch": child_fetch, "stage": child_stage, "encode_ours": child_encode_ours,
            "encode_peer": child_encode_peer}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=800, help="documents at 1x (4x is also run)")
    ap.add_argument("--num-proc", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the results here too")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        fn = CHILDREN[a.child[0]]
        args = [int(x) if x.isdigit() else x for x in a.child[1:]]
        print(json.dumps(fn(*args)))
        return
    if not os.environ.get("CTXREP_DATA_MIRROR"):
        raise SystemExit("set CTXREP_DATA_MIRROR to the data mirror (e.g. ../shared/data)")

    me = [str(Path(__file__).resolve()), "--child"]
    work = Path(tempfile.mkdtemp(prefix="bench_tok_"))
    results = {"num_proc": a.num_proc, "cpu_count": os.cpu_count()}
    try:
        for scale in (1, 4):
            raw, tok = work / f"raw{scale}", work / f"tok{scale}"
            run_measured(me + ["fetch", str(a.docs * scale), str(raw)])
            r, wall, peak = run_measured(me + ["stage", str(raw), str(tok), str(a.num_proc)])
            results[f"stage_{scale}x"] = {"docs": a.docs * scale, "wordpieces": r["wordpieces"],
                                          "seconds": round(wall, 2),
                                          "tokens_per_s": round(r["wordpieces"] / wall),
                                          "peak_rss_mb": round(peak / 2**20)}
        ours, _, _ = run_measured(me + ["encode_ours", str(work / "tok1"), str(work / "enc"),
                                        str(a.num_proc)])
        peer, _, _ = run_measured(me + ["encode_peer", str(work / "raw1"), str(work / "tok1"),
                                        str(a.num_proc)])
        for name, r in (("encode_ours", ours), ("encode_datasets_map", peer)):
            results[name] = {"wordpieces": r["wordpieces"], "seconds": round(r["seconds"], 2),
                             "tokens_per_s": round(r["wordpieces"] / r["seconds"])}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    s1, s4 = results["stage_1x"], results["stage_4x"]
    results["encode_speed_ratio"] = round(results["encode_ours"]["tokens_per_s"]
                                          / results["encode_datasets_map"]["tokens_per_s"], 2)
    results["peak_rss_ratio_4x_over_1x"] = round(s4["peak_rss_mb"] / s1["peak_rss_mb"], 2)
    print(f"{'measure':<34}{'value':>14}")
    print(f"{'encode tokens/s (ours)':<34}{results['encode_ours']['tokens_per_s']:>14,}")
    print(f"{'encode tokens/s (datasets.map)':<34}{results['encode_datasets_map']['tokens_per_s']:>14,}")
    print(f"{'ratio ours / datasets.map':<34}{results['encode_speed_ratio']:>14}")
    for k in ("stage_1x", "stage_4x"):
        r = results[k]
        print(f"{k + ' tokens/s (whole stage)':<34}{r['tokens_per_s']:>14,}")
        print(f"{k + ' peak RSS MB':<34}{r['peak_rss_mb']:>14,}")
    print(f"{'peak RSS 4x / 1x':<34}{results['peak_rss_ratio_4x_over_1x']:>14}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
