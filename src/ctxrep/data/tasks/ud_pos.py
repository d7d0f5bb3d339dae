"""Task ``ud_pos``: its registry entry (see :mod:`ctxrep.data.tasks`)."""

from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.registry import DatasetSpec, HubSource, SPLITS3, one_file_per_split

# sha256 of the published files, as mirrored: written by `ctxrep pin ud_pos`.
SHA256 = {
    "tasks/ud_ewt/en_ewt-ud-dev.conllu": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
    "tasks/ud_ewt/en_ewt-ud-test.conllu": "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
    "tasks/ud_ewt/en_ewt-ud-train.conllu": "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"
}

SPEC = DatasetSpec(
    name="ud_pos", kind="tagging", features=S.tagging(R.UPOS_TAGS),
    mirror=("tasks/ud_ewt/en_ewt-ud-train.conllu", "tasks/ud_ewt/en_ewt-ud-dev.conllu",
            "tasks/ud_ewt/en_ewt-ud-test.conllu"),
    read_mirror=one_file_per_split(SPLITS3, R.conllu_upos),
    hub=HubSource("universal_dependencies", "en_ewt", columns={"tokens": "tokens",
                                                               "tags": "upos"}),
    metrics=("token_accuracy",), description="Universal Dependencies English EWT, UPOS tags",
    sha256=SHA256)
