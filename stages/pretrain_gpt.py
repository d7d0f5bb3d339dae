"""Stage pretrain_gpt → data/models/gpt/ (a Hugging Face model dir, ``is_decoder: true``, with
the corpus's WordPiece tokenizer): the left-to-right Transformer LM of BERT's Table 5, BERT's
network with causal attention trained to predict each next token, on the segments, corpus and
budget of ``pretrain_bert`` (params ``pretrain_gpt``). Runs in profiles that list ``gpt`` in
``left_to_right``."""

import sys

from ctxrep.pretraining.next_token_objective import NextTokenObjective
from ctxrep.pretraining.transformer import pretrain
from ctxrep.stage import stage

if sys.argv[1:] != ["gpt"]:
    sys.exit(f"pretrain_gpt: expected the one argument 'gpt' (its family), got {sys.argv[1:]}")
with stage("pretrain_ltr@gpt", "pretrain_gpt") as ctx:  # dvc.yaml: pretrain_ltr, foreach
    model, result, _ = pretrain(ctx, "pretrain_gpt", "gpt", NextTokenObjective, is_decoder=True)
    ctx.summary(steps=result.steps, tokens=result.train_tokens,
                val_lm_acc=round(result.final_eval["val_lm_acc"], 3))
