"""Task ``sick_r``: its registry entry (see :mod:`ctxrep.data.tasks`)."""

from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.registry import DatasetSpec, HubSource, SPLITS3, one_file_per_split

# sha256 of the published files, as mirrored: written by `ctxrep pin sick_r`.
SHA256 = {
    "tasks/sick/SICK_test_annotated.txt": "2b8aa806658d6fc23c6824c83776c2d4fee7556000817b5ec0f982861413b7d0",
    "tasks/sick/SICK_train.txt": "266cf8047149bd1d68138dd30439f3122bff30069740ac6705bb6197d9f1b48e",
    "tasks/sick/SICK_trial.txt": "5a88cfb62f8c6bd2a3cce0f2421ba2cb8c2be5ab4a800f6f01e2c64aafb7db56"
}

SPEC = DatasetSpec(
    name="sick_r", kind="regression", features=S.regression(),
    mirror=("tasks/sick/SICK_train.txt", "tasks/sick/SICK_trial.txt",
            "tasks/sick/SICK_test_annotated.txt"),
    read_mirror=one_file_per_split(SPLITS3, R.sick_relatedness),
    hub=HubSource("sick", columns={"text": "sentence_A", "text_pair": "sentence_B",
                                   "label": "relatedness_score"}),
    metrics=("pearson_spearman",),
    description="SICK relatedness (SICK-R): similarity score 1-5 of a sentence pair",
    sha256=SHA256)
