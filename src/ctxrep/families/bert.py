"""bert: BERT (Devlin et al. 2019): a Transformer encoder trained by masked LM (+ NSP); judged by
held-out masked-token accuracy. Transferred both ways the paper compares:

    bert-feature    its frozen layers, mixed as ELMo's (learned scalar mix) beside x_k
    bert-random     ``bert-feature`` on the same network untrained: the random-init control
    bert-finetune   the network and a task head trained together, from the checkpoint of
                    ``transfer.bert-finetune.bert`` (pretrain_bert, or import_bert's published one)
    bert-scratch    the same, from a fresh initialisation: the no-pretraining control

and against each left-to-right LM of the package (BERT's Table 5 ablation), both ways.
"""

from ctxrep.families.bilm import ELMO
from ctxrep.families.records import BERT_OVERVIEW, LEARNED, Claim, Family, Method, model_dir_of

FAMILY = Family("bert", "BERT", headlines=("val_mlm_acc", "val_mlm_acc_at_mask", "train_tokens"),
                heldout=("val_mlm_loss", "held-out MLM loss", False),
                recipe_metric="val_mlm_acc", recipe_lower_is_better=False,
                intrinsic=("pseudo_perplexity", "pppl"), featurizer="BertFeaturizer")

# The code that is this family's own (its network, objective, import, stage scripts): the only
# modules besides this one that may name it or its methods (tests/test_families.py).
MODULES = ("src/ctxrep/models/bert.py", "src/ctxrep/models/bert_hf.py",
           "src/ctxrep/models/bert_import.py", "src/ctxrep/pretraining/bert_data.py",
           "src/ctxrep/pretraining/bert_objective.py", "src/ctxrep/report/parts/bert.py",
           "stages/pretrain_bert.py", "stages/import_bert.py")

BERT_FEATURE = Method("bert-feature", "bert", LEARNED)
BERT_RANDOM = Method("bert-random", "bert-random", LEARNED, control=True)
BERT_FINETUNE = Method("bert-finetune", fine_tuned=True)
BERT_SCRATCH = Method("bert-scratch", fine_tuned=True, from_scratch=True, control=True)
METHODS = (BERT_FEATURE, BERT_RANDOM, BERT_FINETUNE, BERT_SCRATCH)
# A published BERT beside ours: stage import_bert writes data/models/bert-published (its weights
# record reports/weights/bert-published.json, its metrics metrics/import_bert.json).
PUBLISHED_STAGE, PUBLISHED_NAME = "import_bert", "bert-published"
# The networks a fine-tuning method can start from (``transfer.<method>.bert``): the stage that
# wrote it, and where: this family's pretraining, or a published BERT (``import_bert``).
STARTING_POINTS = {FAMILY.section: str(FAMILY.model_dir),
                   PUBLISHED_STAGE: str(model_dir_of(PUBLISHED_NAME))}
# The key of a fine-tuned method's params (``transfer.<method>.bert``) and of its cells' records
# that names the starting point.
STARTING_POINT_KEY = "bert"
# Table 1's columns beside ELMo's (ctxrep.families.bilm.TABLES)
TABLE1_METHODS = (BERT_FEATURE.name, BERT_FINETUNE.name, BERT_SCRATCH.name)

CLAIMS = (
    Claim(BERT_FEATURE.name, BERT_RANDOM.name, "pretrained BERT features beat the same network "
          "untrained", "BERT §5 feature-based (seed 000/003)"),
    Claim(BERT_FINETUNE.name, BERT_SCRATCH.name, "fine-tuning a pretrained BERT beats training "
          "the same network from scratch", "BERT §1, §4 (seed 000/003)"),
    Claim(BERT_FINETUNE.name, BERT_FEATURE.name, "fine-tuning beats frozen BERT features",
          "BERT Table 7 (seed 000/003)"),
    Claim(BERT_FINETUNE.name, ELMO.name, "fine-tuned BERT beats feature-based ELMo",
          "BERT Tables 1–3 (seed 003)"),
)


def against_left_to_right(feature: str, finetune: str) -> tuple[Claim, ...]:
    """BERT's Table 5: the masked LM against a left-to-right LM's two methods."""
    return tuple(
        Claim(ours.name, theirs, "the bidirectional masked LM beats a left-to-right LM of the "
              f"same network, corpus and budget ({how})", "BERT Table 5 (seed 000 §3, 003 §2)")
        for ours, theirs, how in ((BERT_FEATURE, feature, "frozen features"),
                                  (BERT_FINETUNE, finetune, "fine-tuned")))


# The published models' scale (the report's one-line scale note).
PRETRAINING = {
    "corpus": "Wikipedia + BookCorpus",
    "sizes": {"BERT-base": "110M parameters (12 layers, 768 hidden, 12 heads)",
              "BERT-large": "340M parameters (24 layers, 1024 hidden, 16 heads)"},
    "seed_file": BERT_OVERVIEW,
}
