"""Stage import_bert → data/models/bert-published/: the published BERT in the local folder
``import_bert.path`` (by default all-MiniLM-L6-v2, which installs from the package index), with
its own WordPiece vocabulary, beside the BERT that pretrain_bert trains. The fine-tuning methods
start from it when their params say ``bert: import_bert``."""

from pathlib import Path

from ctxrep.models.bert_import import import_stage
from ctxrep.stage import stage

OUT = Path("data/models/bert-published")

with stage("import_bert", "import_bert") as ctx:
    import_stage(ctx, "import_bert", "bert-published", ctx.section.path, OUT, curves=False)
