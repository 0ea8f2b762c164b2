#!/usr/bin/env python3
"""Loads `vramfit plan --emit` outputs in the tools' own config classes.

    python3 calibration/harness/check_emit.py DIR

DIR holds files written by crates/cli/tests/emit_python.rs (or by hand):

- `ds_<name>_ws<N>.json`: a DeepSpeed ds_config for a plan of N data-parallel ranks. The "auto"
  values are filled as the Hugging Face Trainer fills them from its defaults
  (transformers/integrations/deepspeed.py `trainer_config_process`: learning_rate 5e-5,
  adam betas (0.9, 0.999), eps 1e-8, weight_decay 0.0, max_grad_norm 1.0), then the config is
  loaded with DeepSpeed's `DeepSpeedConfig` at world size N (an `mpu` reporting N data-parallel
  ranks), which asserts train_batch_size = micro x accumulation x world size and parses every
  section (zero_optimization, offload, bf16/fp16/torch_autocast, optimizer, ...).
- `accelerate_<name>.yaml`: an accelerate config, loaded with accelerate's
  `ClusterConfig.from_yaml_file` (unknown keys are refused there).

Exit 0: every file loaded; 1: one did not (the error is printed); 77: deepspeed or accelerate
(or torch) is not importable here, nothing was checked.
"""
import copy
import json
import os
import re
import sys

TRAINER_DEFAULTS = {
    "lr": 5e-5,
    "betas": [0.9, 0.999],
    "eps": 1e-8,
    "weight_decay": 0.0,
}


def fill_auto(cfg):
    cfg = copy.deepcopy(cfg)
    if cfg.get("gradient_clipping") == "auto":
        cfg["gradient_clipping"] = 1.0
    params = cfg.get("optimizer", {}).get("params", {})
    for k, v in list(params.items()):
        if v == "auto":
            params[k] = TRAINER_DEFAULTS[k]
    return cfg


class DataParallelMpu:
    """The parallel layout DeepSpeedConfig asks about: N data-parallel ranks, no model parallelism."""

    def __init__(self, n):
        self.n = n

    def get_data_parallel_world_size(self):
        return self.n

    def get_data_parallel_rank(self):
        return 0

    def get_model_parallel_world_size(self):
        return 1

    def get_model_parallel_rank(self):
        return 0

    def get_sequence_parallel_world_size(self):
        return 1

    def get_sequence_data_parallel_world_size(self):
        return self.n


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    d = sys.argv[1]
    try:
        from deepspeed.runtime.config import DeepSpeedConfig
        from accelerate.commands.config.config_args import ClusterConfig
        import deepspeed
        import accelerate
    except Exception as e:  # noqa: BLE001 - any import failure means: not checkable here
        print(f"skipped: cannot import deepspeed/accelerate: {e}")
        return 77
    print(f"deepspeed {deepspeed.__version__}, accelerate {accelerate.__version__}")
    failed = 0
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        try:
            m = re.fullmatch(r"ds_(.+)_ws(\d+)\.json", name)
            if m:
                ws = int(m.group(2))
                cfg = fill_auto(json.load(open(path)))
                c = DeepSpeedConfig(cfg, mpu=DataParallelMpu(ws))
                assert c.train_batch_size == c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * ws
                print(
                    f"ok {name}: DeepSpeedConfig world size {ws}, train_batch_size {c.train_batch_size}, "
                    f"zero stage {c.zero_optimization_stage}, optimizer {c.optimizer_name}"
                )
            elif name.startswith("accelerate_") and name.endswith(".yaml"):
                c = ClusterConfig.from_yaml_file(path)
                print(
                    f"ok {name}: ClusterConfig {c.distributed_type}, {c.num_processes} processes, "
                    f"machine_rank {c.machine_rank} of {c.num_machines}"
                )
        except Exception as e:  # noqa: BLE001 - report every file
            failed += 1
            print(f"FAILED {name}: {type(e).__name__}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
