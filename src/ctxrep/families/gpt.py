"""gpt: the left-to-right LM of BERT's Table 5 ablation ("LTR & No NSP"): BERT's network with
causal attention, trained to predict the next token on the corpus, segments and budget of our
BERT (conf ``pretrain_gpt``); judged by held-out perplexity. Not probed, scored on another
domain nor in the report's pretraining sections."""

from ctxrep.families import Family

FAMILY = Family("gpt", "left-to-right LM", headlines=("val_lm_ppl", "val_lm_acc", "train_tokens"),
                left_to_right=True)
