"""Task ``wic``: its registry entry (see :mod:`ctxrep.data.tasks`)."""

from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.registry import DatasetSpec, HubSource, SPLITS3

# sha256 of the published files, as mirrored: written by `ctxrep pin wic`.
SHA256 = {
    "tasks/wic/dev/dev.data.txt": "1c360246ffa3904fc1d8f6f16bb7ae0d7980a1a27e9200e9b43c32fd35af11e7",
    "tasks/wic/dev/dev.gold.txt": "665ee959c2cf7db2a4255b7a049bdfa165b970482145cfd2ac456007d4dcf1d6",
    "tasks/wic/test/test.data.txt": "28befe601f5bdbc8e452e9538f6d3582a164647ad5949a9808a74908e70031f7",
    "tasks/wic/test/test.gold.txt": "a69386c579762d9ddf988a61896a2e912f402410185f5e8316007093799b341f",
    "tasks/wic/train/train.data.txt": "3a56ff8285ca9703d6c91dfb7cc79760171899c560bb6a8698fa4559a71b160d",
    "tasks/wic/train/train.gold.txt": "3f614ca12c03a90fecc34471d8ae666f924a3c657b5620fcfb46d9b2b50bb7b2"
}


def read_mirror(paths, stats, opts):
    """Each split is a data file and a gold file, in that order."""
    return {split: R.wic(paths[2 * i], paths[2 * i + 1], stats) for split, i in SPLITS3.items()}


SPEC = DatasetSpec(
    name="wic", kind="word_in_context", features=S.word_in_context(),
    mirror=("tasks/wic/train/train.data.txt", "tasks/wic/train/train.gold.txt",
            "tasks/wic/dev/dev.data.txt", "tasks/wic/dev/dev.gold.txt",
            "tasks/wic/test/test.data.txt", "tasks/wic/test/test.gold.txt"),
    read_mirror=read_mirror,
    hub=HubSource("super_glue", "wic", columns={"word": "word", "sentence1": "sentence1",
                                                "sentence2": "sentence2", "start1": "start1",
                                                "end1": "end1", "start2": "start2",
                                                "end2": "end2", "label": "label"}),
    metrics=("accuracy",), description="WiC: does the word have the same sense in both sentences",
    sha256=SHA256)
