"""A Lightning ``Callback``: the pre-flight check at ``on_train_start`` (the
LightningModule, its optimizer, the trainer's precision, world size and FSDP/DeepSpeed
strategy) and the OOM explainer for the run.

    from vramfit.integrations.lightning import VramfitCallback

    trainer = L.Trainer(precision="bf16-mixed",
                        callbacks=[VramfitCallback(batch=8, seq=2048, out_dir="oom-report")])
    trainer.fit(module, datamodule)   # stops before step 1 if it cannot fit
"""

from typing import Any, Optional

try:  # the `lightning` package, else the older `pytorch_lightning`
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - depends on what is installed
    from pytorch_lightning.callbacks import Callback

from .. import torch as guard

# Lightning precision -> vramfit flags (docs: lightning.ai "N-bit precision")
_PRECISION = {
    "bf16-mixed": {"precision": "amp-bf16"},
    "16-mixed": {"precision": "amp-fp16"},
    "32-true": {"precision": "fp32"},
    "32": {"precision": "fp32"},
    "bf16-true": {"dtype": "bf16"},
}


def trainer_flags(trainer: Any) -> dict:
    """vramfit estimate flags from a Lightning Trainer (a mapping of names, no figure)."""
    f: dict = dict(_PRECISION.get(str(getattr(trainer, "precision", "")), {}))
    accum = getattr(trainer, "accumulate_grad_batches", 1)
    if accum and accum > 1:
        f["grad_accum"] = accum
    strategy = getattr(trainer, "strategy", None)
    names = [c.__name__ for c in type(strategy).__mro__] if strategy is not None else []
    if "DeepSpeedStrategy" in names:
        cfg = getattr(strategy, "config", None) or {}
        stage = (cfg.get("zero_optimization") or {}).get("stage")
        if stage:
            f["zero"] = int(stage)
    elif "FSDPStrategy" in names:
        s = getattr(getattr(strategy, "sharding_strategy", None), "name", "FULL_SHARD")
        f["fsdp"] = "shard-grad-op" if s == "SHARD_GRAD_OP" else "full-shard"
    ws = getattr(trainer, "world_size", 1)
    if ws and ws > 1:
        f["gpus"] = ws
    return f


class VramfitCallback(Callback):
    """Check the fit before step 1 and explain an OOM.

    ``batch``: micro-batch per GPU (default: the train dataloader's batch size);
    ``seq``: tokens per sequence; ``raise_on_fail``: stop before step 1 when it does not
    fit; ``out_dir``: where OOM snapshots and reports go (None: no OOM handler). Other
    keywords are flags of ``vramfit estimate``.
    """

    def __init__(self, batch: Optional[int] = None, seq: Optional[int] = None, *, raise_on_fail: bool = True,
                 out_dir: Optional[str] = "vramfit-oom", max_entries: int = 100_000, **flags: Any) -> None:
        super().__init__()
        self.batch = batch
        self.seq = seq
        self.raise_on_fail = raise_on_fail
        self.out_dir = out_dir
        self.max_entries = max_entries
        self.flags = flags
        self.result: Optional[guard.Preflight] = None
        self.oom: Optional[guard.OomHandler] = None

    def setup(self, trainer, pl_module, stage=None):
        if self.out_dir is not None and self.oom is None:
            self.oom = guard.on_oom(self.out_dir, max_entries=self.max_entries, rank=getattr(trainer, "global_rank", None))

    def on_train_start(self, trainer, pl_module):
        batch = self.batch
        if batch is None:
            dl = getattr(trainer, "train_dataloader", None)
            batch = getattr(dl, "batch_size", None)
        opts = getattr(trainer, "optimizers", None) or [None]
        flags = dict(trainer_flags(trainer), **self.flags)
        self.result = guard.preflight(pl_module, opts[0], batch=batch, seq=self.seq,
                                      raise_on_fail=self.raise_on_fail, **flags)

    def teardown(self, trainer, pl_module, stage=None):
        if self.oom is not None:
            self.oom.uninstall()
            self.oom = None
