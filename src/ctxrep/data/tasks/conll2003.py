"""Task ``conll2003``: its registry entry (see :mod:`ctxrep.data.tasks`)."""

from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.registry import DatasetSpec, HubSource, SPLITS3, one_file_per_split

# sha256 of the published files, as mirrored: written by `ctxrep pin conll2003`.
SHA256 = {
    "tasks/conll2003/dev.txt": "c02eb19809eafb83998326a0481942eb37d96f31826ae387cfe8773699969f5b",
    "tasks/conll2003/test.txt": "dc4ac7f3d6d01a6bec59261814561da3b287b6b493b97d1f69c580b52ec1831b",
    "tasks/conll2003/train.txt": "213953b5522fb7924802d883e50f027b2c6ffb5d4d0e63368ed82909f9b60423"
}

SPEC = DatasetSpec(
    name="conll2003", kind="tagging", features=S.tagging(R.CONLL_NER_TAGS),
    mirror=("tasks/conll2003/train.txt", "tasks/conll2003/dev.txt", "tasks/conll2003/test.txt"),
    read_mirror=one_file_per_split(SPLITS3, R.conll2003),
    hub=HubSource("eriktks/conll2003", columns={"tokens": "tokens", "tags": "ner_tags"}),
    metrics=("seqeval_f1",), description="CoNLL-2003 English NER (IOB2)",
    sha256=SHA256)
