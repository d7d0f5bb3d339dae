"""Task ``sst5``: its registry entry (see :mod:`ctxrep.data.tasks`)."""

from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.registry import DatasetSpec, HubSource, SPLITS3, one_file_per_split

# sha256 of the published files, as mirrored: written by `ctxrep pin sst5`.
SHA256 = {
    "tasks/sst/stsa.fine.dev": "b2f76c62b960f9fda5c6d751edb125abab4f878eb94a8754239b7f4af647f4c3",
    "tasks/sst/stsa.fine.test": "0e2ebb450c231f7b3d67fc932066e7bb26ae7bad8c88488f45ed44ef02eb3c73",
    "tasks/sst/stsa.fine.train": "9b52b5f686ed438d4d0274c385369251b3d579b578fddd340ba8a9bae2ca4bee"
}

SPEC = DatasetSpec(
    name="sst5", kind="classification", features=S.classification(R.SST5_LABELS),
    mirror=("tasks/sst/stsa.fine.train", "tasks/sst/stsa.fine.dev", "tasks/sst/stsa.fine.test"),
    read_mirror=one_file_per_split(SPLITS3, lambda p, s: R.sst(p, s, 5)),
    hub=HubSource("SetFit/sst5", columns={"text": "text", "label": "label"}),
    metrics=("accuracy", "macro_f1"), description="SST-5 fine-grained sentiment, sentence level",
    sha256=SHA256)
