"""Task ``squad``: its registry entry (see :mod:`ctxrep.data.tasks`)."""

from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.registry import DatasetSpec, HubSource

# sha256 of the published files, as mirrored: written by `ctxrep pin squad`.
SHA256 = {
    "tasks/squad/dev-v1.1.json": "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"
}


def read_mirror(paths, stats, opts):
    """The mirror holds only the dev set: split it by article into train and validation."""
    articles = R.squad_articles(paths[0], stats)
    train, validation = R.split_articles(articles, opts["squad_train_fraction"], opts["seed"])
    return {"train": train, "validation": validation}


SPEC = DatasetSpec(
    name="squad", kind="span_qa", features=S.span_qa(),
    mirror=("tasks/squad/dev-v1.1.json",), read_mirror=read_mirror,
    hub=HubSource("rajpurkar/squad", splits={"train": "train", "validation": "validation"}),
    metrics=("squad",), description="SQuAD v1.1 (offline: dev set split by article)",
    sha256=SHA256)
