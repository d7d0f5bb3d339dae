"""The BERT recipe screen in one figure: held-out masked-token accuracy against training seconds.

    python bench/plot_bert_recipes.py bench/results/bert_recipes.jsonl docs/recipes-bert.png

Two panels per recipe line (``bench/screen_bert_recipes.py`` writes the JSON lines): accuracy
over every chosen position (what pretrain_bert reported as ``val_mlm_acc``) and at [MASK]
positions alone, with the most-frequent token's rate as a dashed line. Every point is one
evaluation; the x axis is training seconds on one thread (evaluation excluded).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ctxrep.report import plots


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path)
    p.add_argument("out", type=Path)
    args = p.parse_args()
    recipes = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    fig, (every, at_mask) = plots.new_figure(2, extra_width=4.5)
    for recipe in recipes:
        curve = recipe["curve"]
        seconds = [c["train_s"] for c in curve]
        label = f"{recipe['name']} (held-out at {recipe['args'].get('eval_seq_len', 128)})"
        (line,) = every.plot(seconds, [100 * c["val_mlm_acc"] for c in curve], marker=".",
                             linewidth=1)
        if "val_acc_at_mask" in curve[0]:
            at_mask.plot(seconds, [100 * c["val_acc_at_mask"] for c in curve], marker=".",
                         linewidth=1, color=line.get_color())
        at_mask.plot([], [], color=line.get_color(), label=label)  # one legend for both panels
    rates = [c["val_mlm_acc_most_frequent"] for r in recipes for c in r["curve"][-1:]]
    for ax in (every, at_mask):
        ax.axhline(100 * sum(rates) / len(rates), linestyle="--", color="grey", linewidth=1,
                   label="most frequent token")
        ax.set(xlabel="training seconds (one thread)", ylabel="held-out accuracy (%)")
        ax.grid(alpha=0.3)
    every.axhline(25, linestyle=":", color="black", linewidth=1)
    at_mask.plot([], [], linestyle=":", color="black", label="issue 45's target (25 %, left)")
    every.set_title("every chosen position", fontsize="medium")
    at_mask.set_title("[MASK] positions only", fontsize="medium")
    at_mask.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    plots.save_png(fig, args.out)
    print(f"wrote {args.out} ({len(recipes)} recipes)")


if __name__ == "__main__":
    main()
