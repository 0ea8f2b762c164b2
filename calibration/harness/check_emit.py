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
  DeepSpeedConfig reads the world size only when `deepspeed.comm` answers get_rank(); without a
  process group it silently takes world size 1. So a one-process gloo group is started first
  (DeepSpeed's TorchBackend JIT-builds its small shm op once: needs ninja and a C++ compiler),
  and a config that is right only at world size 1 is checked to be refused at 4 before the real files.
- `accelerate_<name>.yaml`: an accelerate config, loaded with accelerate's
  `ClusterConfig.from_yaml_file` (unknown keys are refused there); one with a
  `parallelism_config` (hybrid sharding) also goes through `accelerate launch`'s own argument
  validation and environment (`_validate_launch_command`, `prepare_multi_gpu_env`).

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


def start_comm():
    """One-process gloo group, and DeepSpeed's comm backend over it."""
    import datetime
    import socket

    import torch.distributed as td
    import deepspeed.comm.comm as dscomm
    from deepspeed.comm.torch import TorchBackend

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    td.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    dscomm.cdb = TorchBackend("gloo", datetime.timedelta(seconds=60), None)


def launch_env(path, c):
    """For a config with a `parallelism_config` (FSDP2 hybrid sharding): what
    `accelerate launch --config_file PATH` makes of it — the launcher's own
    argument validation and the environment it hands the Accelerator, whose
    PARALLELISM_CONFIG_* sizes must be the file's and multiply to the processes."""
    if not c.parallelism_config:
        return ""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(["--config_file", path, "train.py"])
    args, _, _ = _validate_launch_command(args)
    env = prepare_multi_gpu_env(args)
    rep = int(env["PARALLELISM_CONFIG_DP_REPLICATE_SIZE"])
    shard = int(env["PARALLELISM_CONFIG_DP_SHARD_SIZE"])
    assert env.get("ACCELERATE_USE_PARALLELISM_CONFIG") == "true" and env.get("FSDP_VERSION") == "2", env
    assert rep == c.parallelism_config["parallelism_config_dp_replicate_size"], env
    assert rep * shard == c.num_processes, (rep, shard, c.num_processes)
    return f"; accelerate launch: FSDP2, dp_replicate {rep} x dp_shard {shard}"


def autoep(cfg, c, ws):
    """DeepSpeed AutoEP (`expert_parallel`, DeepSpeed >= 0.19.2, PR #7938): the section as
    DeepSpeedConfig parsed it (`parse_autoep_config`), put through the checks
    `deepspeed.initialize()` runs before any process group (`validate_autoep_config`:
    preset name, folding rules at this world size, ZeRO stage, offload) and the expert
    width tiling the ranks (`build_folding_spec`). '' when the config has no such section."""
    if "expert_parallel" not in cfg:
        return ""
    from deepspeed.module_inject.auto_ep_config import PRESET_MODELS, validate_autoep_config

    ep = c.expert_parallel_config
    assert ep.enabled and ep.autoep_size == cfg["expert_parallel"]["autoep_size"], vars(ep)
    assert ep.preset_model in PRESET_MODELS, ep.preset_model
    validate_autoep_config(
        ep,
        world_size=ws,
        pp_size=1,
        tp_size=1,
        sp_size=1,
        zero_stage=c.zero_optimization_stage,
        zero_offload_optimizer=c.zero_config.offload_optimizer is not None,
        zero_offload_param=c.zero_config.offload_param is not None,
    )
    return f", AutoEP autoep_size {ep.autoep_size} preset {ep.preset_model} (validate_autoep_config at world size {ws})"


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
    import torch

    print(f"deepspeed {deepspeed.__version__}, accelerate {accelerate.__version__}, torch {torch.__version__}")
    start_comm()
    # the world size must reach DeepSpeedConfig: 2 = 1 x 2 at world size 1, but not at 4
    try:
        DeepSpeedConfig(
            {"train_batch_size": 2, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2},
            mpu=DataParallelMpu(4),
        )
        print("FAILED self-check: DeepSpeedConfig ignored the world size (no process group?)")
        return 1
    except AssertionError:
        pass
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
                # ZeRO++ hpZ: the parsed group size (DeepSpeedZeroConfig.zero_hpz_partition_size),
                # whose groups of consecutive ranks must divide the world
                # (groups._create_zero_param_parallel_group: _ensure_divisibility)
                hpz = cfg.get("zero_optimization", {}).get("zero_hpz_partition_size")
                extra = ""
                if hpz is not None:
                    got = c.zero_config.zero_hpz_partition_size
                    assert got == hpz and ws % got == 0 and c.zero_optimization_stage == 3, (got, hpz, ws)
                    extra = f", zero_hpz_partition_size {got}"
                print(
                    f"ok {name}: DeepSpeedConfig world size {ws}, train_batch_size {c.train_batch_size}, "
                    f"zero stage {c.zero_optimization_stage}, optimizer {c.optimizer_name}{extra}{autoep(cfg, c, ws)}"
                )
            elif name.startswith("accelerate_") and name.endswith(".yaml"):
                c = ClusterConfig.from_yaml_file(path)
                print(
                    f"ok {name}: ClusterConfig {c.distributed_type}, {c.num_processes} processes, "
                    f"machine_rank {c.machine_rank} of {c.num_machines}{launch_env(path, c)}"
                )
        except Exception as e:  # noqa: BLE001 - report every file
            failed += 1
            print(f"FAILED {name}: {type(e).__name__}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
