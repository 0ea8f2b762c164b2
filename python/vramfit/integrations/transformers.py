"""A ``transformers`` ``TrainerCallback``: the pre-flight check at ``on_train_begin``
(the model, the optimizer the Trainer built, its batch size, precision, gradient
checkpointing, optimizer and DeepSpeed config), and the OOM explainer for the run.

    from vramfit.integrations.transformers import VramfitCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[VramfitCallback(seq=2048, out_dir="oom-report")])
    trainer.train()   # raises vramfit.torch.OutOfMemoryPredicted before step 1 if it cannot fit
"""

from typing import Any, Optional

from transformers import TrainerCallback

from .. import torch as guard


def trainer_flags(args: Any) -> dict:
    """vramfit estimate flags from ``TrainingArguments`` (a mapping of names, no figure)."""
    f: dict = {}
    if getattr(args, "bf16", False):
        f["precision"] = "amp-bf16"
    elif getattr(args, "fp16", False):
        f["precision"] = "amp-fp16"
    accum = getattr(args, "gradient_accumulation_steps", 1)
    if accum and accum > 1:
        f["grad_accum"] = accum
    if getattr(args, "gradient_checkpointing", False):
        f["checkpointing"] = "full"
    ds = getattr(args, "deepspeed", None)
    if isinstance(ds, str):
        f["deepspeed"] = ds
    return f


class VramfitCallback(TrainerCallback):
    """Check the fit before step 1 and explain an OOM.

    ``seq``: tokens per sequence (your max_length; the Trainer does not know it).
    ``raise_on_fail``: stop before step 1 when the job does not fit.
    ``out_dir``: where OOM snapshots and reports go (None: no OOM handler).
    Other keywords are flags of ``vramfit estimate`` (``loss="fused"``, ``gpu="h100"``).
    """

    def __init__(self, seq: Optional[int] = None, *, raise_on_fail: bool = True,
                 out_dir: Optional[str] = "vramfit-oom", max_entries: int = 100_000, **flags: Any) -> None:
        self.seq = seq
        self.raise_on_fail = raise_on_fail
        self.out_dir = out_dir
        self.max_entries = max_entries
        self.flags = flags
        self.result: Optional[guard.Preflight] = None
        self.oom: Optional[guard.OomHandler] = None

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):  # noqa: D401
        if self.out_dir is not None and self.oom is None:
            self.oom = guard.on_oom(self.out_dir, max_entries=self.max_entries)
        if model is not None:
            flags = dict(trainer_flags(args), **self.flags)
            self.result = guard.preflight(
                model, optimizer, batch=args.per_device_train_batch_size, seq=self.seq,
                raise_on_fail=self.raise_on_fail, **flags,
            )
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self.oom is not None:
            self.oom.uninstall()
            self.oom = None
        return control
