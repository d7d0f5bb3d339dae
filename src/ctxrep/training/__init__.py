"""Training runs, whatever is trained: the loop pretraining and transfer share.

    loop.py         LoopConfig, the Objective protocol, train(), TrainResult
    optim.py        the optimizer rule (AdamW with decay on matrices only, or Adagrad) and the
                    learning-rate schedule
    checkpoints.py  atomic checkpoint folders (exact resume) and their run keys
    distributed.py  DDP under torchrun: rank, world, device
    curves.py       the curves of a run: DVCLive folders and MLflow, one path
"""
