"""Stage transfer@<task>-<method>: one feature-based grid cell over every seed.

Writes metrics/transfer/<task>/<method>.json (mean ± std over seeds of each metric, and the
learned scalar-mix weights; see ctxrep.transfer.cell), each seed's predictions, and each seed's
curves as it trains (DVCLive: dvclive/transfer/<task>/<method>/seed<N>/). Fine-tuned methods run
in stage finetune: this one imports none of their code.
"""

import sys

from ctxrep.transfer.cell_stage import cell_stage
from ctxrep.transfer.feature_train import FeatureBased

cell_stage(sys.argv[1], sys.argv[2], FeatureBased.for_cell)
