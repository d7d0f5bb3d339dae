"""Stage pretrain_ltr@<family> → data/models/<family>/ (a Hugging Face model dir,
``is_decoder: true``, with the corpus's WordPiece tokenizer): a left-to-right Transformer LM of
BERT's Table 5 (``ctxrep.families.LEFT_TO_RIGHT``), BERT's network with causal attention trained
to predict each next token, on the segments, corpus and budget its params section
``pretrain_<family>`` names. Runs in profiles that list the family in ``left_to_right``."""

import sys

from ctxrep import config
from ctxrep.families import LEFT_TO_RIGHT, family
from ctxrep.pretraining.next_token_objective import NextTokenObjective
from ctxrep.pretraining.transformer import pretrain
from ctxrep.stage import stage

if len(sys.argv) != 2 or sys.argv[1] not in LEFT_TO_RIGHT:
    sys.exit(f"pretrain_ltr: expected one left-to-right family {list(LEFT_TO_RIGHT)}, got {sys.argv[1:]}")
name = sys.argv[1]
with stage(config.pretrain_stage_name(name), family(name).section) as ctx:  # dvc.yaml: pretrain_ltr
    _, result, _ = pretrain(ctx, family(name).section, name, NextTokenObjective, is_decoder=True)
    ctx.summary(steps=result.steps, tokens=result.train_tokens,
                val_lm_acc=round(result.final_eval["val_lm_acc"], 3))
