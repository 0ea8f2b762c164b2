#!/usr/bin/env python3
"""Loads `vramfit plan --emit torchtitan` recipes in the installed torchtitan.

    python3 calibration/harness/check_torchtitan.py DIR

DIR holds pairs written by crates/cli/tests/emit_python.rs (or by hand):

- `tt_<name>_ws<N>.py`: the recipe module (`def vramfit_plan() -> Trainer.Config`) for a plan
  of N GPUs;
- `tt_<name>_ws<N>.json`: what the plan says (`tp`, `pp`, `cp`, `dp`, `micro_batch`,
  `grad_accum`, `seq`, `checkpointing`), from `vramfit plan --json`.

Each recipe is imported and called, then checked the way torchtitan checks it before training:
`Trainer.Config.__post_init__` again (the recipe edits the baseline after it was built, so its
checks — pipeline micro-batch size, CUDA graphs under pipeline parallelism — are run on the
edited config), `ParallelDims.from_config(parallelism, N)` (the degrees multiply to the world
size), and the batch as `Trainer.__init__` derives it: in torchtitan 0.3.0 (PyPI) from
`local_batch_size`, `global_batch_size` and `pipeline_parallel_microbatch_size`, after it from
the `num_tokens_*` fields. The derived micro-batch, accumulation (or pipeline micro-batches),
sequence length and degrees must equal the plan's.

Exit 0: every recipe loaded and matched; 1: one did not (the error is printed); 77: torchtitan
(or torch) is not importable here, nothing was checked.
"""
import importlib.util
import json
import os
import sys


def batch_of(cfg):
    """(micro_batch, accumulation or pipeline micro-batches, seq) as torchtitan derives them."""
    t, p = cfg.training, cfg.parallelism
    dp = p.data_parallel_replicate_degree * p.data_parallel_shard_degree
    if hasattr(t, "num_tokens_per_train_step"):
        seq = t.max_context_length
        micro = t.num_tokens_per_microbatch_per_dp_rank // seq
        steps = t.num_tokens_per_train_step // (t.num_tokens_per_microbatch_per_dp_rank * dp)
        if p.pipeline_parallel_degree > 1:
            return micro, p.num_pp_microbatches, seq
        return micro, steps, seq
    # torchtitan 0.3.0, torchtitan/trainer.py Trainer.__init__
    global_batch = t.global_batch_size if t.global_batch_size > 0 else t.local_batch_size * dp
    assert global_batch % (t.local_batch_size * dp) == 0, "global batch not a multiple of local x dp"
    accumulation = global_batch // (t.local_batch_size * dp)
    if p.pipeline_parallel_degree > 1:
        micro = p.pipeline_parallel_microbatch_size
        assert t.local_batch_size % micro == 0, "local batch not a multiple of the pipeline micro-batch"
        return micro, accumulation * (t.local_batch_size // micro), t.seq_len
    return t.local_batch_size, accumulation, t.seq_len


def check(path, want, world):
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.distributed.activation_checkpoint import FullAC

    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cfg = module.vramfit_plan()
    if hasattr(cfg, "__post_init__"):
        cfg.__post_init__()
    if hasattr(cfg, "_validate_cuda_graphs"):
        # Trainer.__init__ calls it again after overrides
        cfg._validate_cuda_graphs()
    p = cfg.parallelism
    ParallelDims.from_config(p, world)
    micro, accum, seq = batch_of(cfg)
    got = {
        "tp": p.tensor_parallel_degree,
        "pp": p.pipeline_parallel_degree,
        "cp": p.context_parallel_degree,
        "dp": p.data_parallel_replicate_degree * p.data_parallel_shard_degree,
        "micro_batch": micro,
        "grad_accum": accum,
        "seq": seq,
        "checkpointing": isinstance(cfg.activation_checkpoint, FullAC.Config),
    }
    wrong = {k: (got[k], want[k]) for k in want if got.get(k) != want[k]}
    if wrong:
        raise AssertionError(f"the recipe differs from the plan (recipe, plan): {wrong}")
    return got


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        import torch  # noqa: F401
        import torchtitan  # noqa: F401
        from torchtitan.trainer import Trainer  # noqa: F401
    except Exception as e:  # an absent or half-installed torchtitan
        print(f"skipped: torchtitan is not importable here ({type(e).__name__}: {e})")
        return 77
    version = getattr(torchtitan, "__version__", "unknown")
    d = sys.argv[1]
    names = sorted(f for f in os.listdir(d) if f.startswith("tt_") and f.endswith(".py"))
    if not names:
        print(f"no tt_*.py recipes in {d}")
        return 1
    for f in names:
        world = int(f[:-3].rsplit("_ws", 1)[1])
        with open(os.path.join(d, f[:-3] + ".json")) as j:
            want = json.load(j)
        try:
            got = check(os.path.join(d, f), want, world)
        except Exception as e:
            print(f"FAIL {f} (torchtitan {version}): {type(e).__name__}: {e}")
            return 1
        print(f"ok   {f} (torchtitan {version}): {got}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
