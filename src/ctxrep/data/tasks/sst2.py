"""Task ``sst2``: its registry entry (see :mod:`ctxrep.data.tasks`)."""

from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.registry import DatasetSpec, HubSource, SPLITS3, one_file_per_split

# sha256 of the published files, as mirrored: written by `ctxrep pin sst2`.
SHA256 = {
    "tasks/sst/stsa.binary.dev": "02fedc82855dbdcabe82c65ed1af6c6570788eaac51073cdb35ee8c7784426d1",
    "tasks/sst/stsa.binary.test": "6a80dc9b9a0db2d3b37f2f809304febad31c90ab67a5b4157b7d9f881c53ef5b",
    "tasks/sst/stsa.binary.train": "71c04bcc41291fa47454dd670df701b14ee9249156babeaac404cfe2c8d74338"
}

SPEC = DatasetSpec(
    name="sst2", kind="classification", features=S.classification(R.SST2_LABELS),
    mirror=("tasks/sst/stsa.binary.train", "tasks/sst/stsa.binary.dev",
            "tasks/sst/stsa.binary.test"),
    read_mirror=one_file_per_split(SPLITS3, lambda p, s: R.sst(p, s, 2)),
    hub=HubSource("SetFit/sst2", columns={"text": "text", "label": "label"}),
    metrics=("accuracy", "macro_f1"), description="SST-2 binary sentiment, sentence level",
    sha256=SHA256)
