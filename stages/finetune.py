"""Stage finetune@<task>-<method>: one fine-tuned grid cell (bert-finetune, bert-scratch) over
every seed; also a left-to-right LM's (finetune_ltr@<task>-<family>) and a Hugging Face
checkpoint's (finetune_hf@<task>-<name>, method hf-<name>-finetune).

Writes what a feature-based cell of stage transfer writes, in the same places
(metrics/transfer/<task>/<method>.json, each seed's predictions and DVCLive curves; see
ctxrep.transfer.cell), with the rate each seed trained at and, where the params give a grid, each
rate's dev score. Feature-based methods run in stage transfer: this one imports none of their code.
"""

import sys

from ctxrep.transfer.cell_stage import cell_stage
from ctxrep.transfer.finetune import FineTuning

cell_stage(sys.argv[1], sys.argv[2], FineTuning.for_cell)
