#!/usr/bin/env python3
"""Runs Megatron-LM's own argument parser on `vramfit plan --emit megatron` scripts.

    MEGATRON_LM=/path/to/Megatron-LM python3 calibration/harness/check_megatron_args.py DIR

DIR holds `megatron_*.sh` files written by `vramfit plan ... --emit megatron`. For each, the
`pretrain_gpt.py` flags are read back (continuation lines joined, `shlex`-split, the script's
variables given the values below), then parsed by `megatron.training.arguments.parse_args` of the
Megatron-LM checkout in MEGATRON_LM (the flags are partly generated from `TransformerConfig` /
`TrainingConfig` dataclass fields by its `ArgumentGroupFactory`, so only the real parser can say a
flag exists). argparse exits on an unknown flag or a value of the wrong type; the parsed values of the
plan's switches are then compared with the flags written (TP, PP, EP, expert-TP, micro and global batch,
sequence parallelism, distributed optimizer, recompute, bf16). Then `validate_args` runs at the
script's world size (`--nproc-per-node` x its default NNODES, as torchrun's WORLD_SIZE) with
CUDA_DEVICE_MAX_CONNECTIONS=1 (the script exports it): it asserts that TP x PP divides the world, that
the global batch is a multiple of micro-batch x data-parallel ranks, the experts a multiple of EP, and
the rest of Megatron's rules; its data-parallel size must be the DP the script's header states. A
script whose global batch is made one too large must fail there (the check can fail).

`pip install megatron-core` does not ship `megatron/training/` (checked: megatron-core 0.16.1's
wheel has only `megatron/core`), so a Megatron-LM source checkout is needed. Megatron-LM imports
torch (and optionally Transformer Engine) at module level; when torch is not importable here, a
stand-in module answers those imports with placeholder classes (argparse building needs only
their names; no tensor is made). The stand-in is announced on stdout; with a real torch it is not
used.

Exit 0: every script parsed and matched; 1: one did not (the error is printed); 77: MEGATRON_LM
is not set or holds no megatron/training/arguments.py, nothing was checked.
"""
import glob
import importlib.abc
import importlib.machinery
import os
import re
import shlex
import sys
import types
import typing

VARS = {
    "$ROTARY_BASE": "500000",
    "$DATA_PATH": "/data/corpus_text_document",
    "$LR": "1.0e-4",
    "$TRAIN_ITERS": "1000",
    # MLA rope (YaRN) and DeepSeek router settings the script takes from config.json
    "$ROTARY_SCALING_FACTOR": "40",
    "$MSCALE": "1.0",
    "$MSCALE_ALL_DIM": "1.0",
    "$MOE_ROUTER_NUM_GROUPS": "8",
    "$MOE_ROUTER_GROUP_TOPK": "4",
    "$MOE_ROUTER_TOPK_SCALING_FACTOR": "2.5",
}

# modules Megatron-LM imports at module level that a CPU-only box may lack
STUBBED = (
    "torch", "transformer_engine", "apex", "triton", "einops", "flash_attn", "numpy", "nvidia",
    "tensorstore", "zarr", "wandb", "onelogger", "modelopt", "emerging_optimizers", "nvtx",
    "mamba_ssm", "causal_conv1d", "flashinfer", "deep_ep", "tqdm", "tiktoken", "sentencepiece",
    "transformers", "datasets", "psutil", "multistorageclient", "nvidia_resiliency_ext", "pynvml",
    "opentelemetry", "safetensors", "hydra", "omegaconf", "huggingface_hub", "cuda",
)


class _Meta(typing._ProtocolMeta):  # Megatron mixes torch.nn.Module with typing.Protocol bases
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Meta(name, (_Placeholder,), {})

    def __or__(cls, other):
        return typing.Union[cls, other]

    __ror__ = __or__

    def __getitem__(cls, item):
        return cls


class _Placeholder(metaclass=_Meta):
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Placeholder()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder()

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Meta(name, (_Placeholder,), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names):
        self.names = names

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        m.__spec__ = spec
        m.__version__ = "2.9.0"
        return m

    def exec_module(self, module):
        pass


def missing(names):
    out = []
    for n in names:
        try:
            __import__(n)
        except Exception:
            out.append(n)
    return out


def script_args(text):
    """The pretrain_gpt.py flags of a megatron_plan.sh, variables filled."""
    joined = text.replace("\\\n", " ")
    line = next(l for l in joined.splitlines() if "pretrain_gpt.py" in l and l.lstrip().startswith("torchrun"))
    after = line.split("pretrain_gpt.py", 1)[1]
    # longest names first: $MSCALE must not eat the head of $MSCALE_ALL_DIM
    for k, v in sorted(VARS.items(), key=lambda kv: -len(kv[0])):
        after = after.replace(k, v)
    return shlex.split(after)


def flag(argv, name, default=None):
    return int(argv[argv.index(name) + 1]) if name in argv else default


def world(text):
    nodes = int(re.search(r"NNODES=\$\{NNODES:-(\d+)\}", text).group(1))
    per = int(re.search(r"--nproc-per-node (\d+)", text).group(1))
    return nodes * per


def validated(argv, world_size, parse_args, validate_args):
    """parse_args then validate_args at `world_size` ranks (its printout silenced)."""
    import contextlib
    import io

    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    sys.argv = ["pretrain_gpt.py"] + argv
    a = parse_args()
    with contextlib.redirect_stdout(io.StringIO()):
        validate_args(a, {})
    return a


def check(path, parse_args, validate_args):
    return check_text(open(path).read(), parse_args, validate_args)


def check_text(text, parse_args, validate_args):
    argv = script_args(text)
    a = validated(argv, world(text), parse_args, validate_args)
    dp = int(re.search(r" x DP (\d+)", text).group(1))
    if a.data_parallel_size != dp:
        raise AssertionError(f"validate_args data-parallel size {a.data_parallel_size}, the script says DP {dp}")
    recompute = argv[argv.index("--recompute-granularity") + 1] if "--recompute-granularity" in argv else None
    want = {
        "tensor_model_parallel_size": flag(argv, "--tensor-model-parallel-size"),
        "pipeline_model_parallel_size": flag(argv, "--pipeline-model-parallel-size"),
        "expert_model_parallel_size": flag(argv, "--expert-model-parallel-size", 1),
        # absent: Megatron's default, the TP size (arguments.py validate_args)
        "expert_tensor_parallel_size": flag(
            argv, "--expert-tensor-parallel-size", flag(argv, "--tensor-model-parallel-size")
        ),
        "micro_batch_size": flag(argv, "--micro-batch-size"),
        "global_batch_size": flag(argv, "--global-batch-size"),
        "sequence_parallel": "--sequence-parallel" in argv,
        "use_distributed_optimizer": "--use-distributed-optimizer" in argv,
        "optimizer_cpu_offload": "--optimizer-cpu-offload" in argv,
        "decoder_first_pipeline_num_layers": flag(argv, "--decoder-first-pipeline-num-layers"),
        "decoder_last_pipeline_num_layers": flag(argv, "--decoder-last-pipeline-num-layers"),
        "multi_latent_attention": "--multi-latent-attention" in argv,
        "recompute_granularity": recompute,
        "bf16": "--bf16" in argv,
        "train_iters": flag(argv, "--train-iters"),
    }
    got = {k: getattr(a, k) for k in want}
    if got != want:
        raise AssertionError(f"parsed {got}, written {want}")
    # the expert grid of megatron/core/parallel_state.py initialize_model_parallel, which
    # validate_args does not reach (it needs torch.distributed): world_size must divide by
    # expert_tensor_parallel_size x expert_model_parallel_size x pipeline_model_parallel_size
    # ("world_size ... is not divisible by expert_tensor_model_pipeline_parallel size")
    grid = a.expert_tensor_parallel_size * a.expert_model_parallel_size * a.pipeline_model_parallel_size
    if a.num_experts and a.world_size % grid != 0:
        raise AssertionError(f"world size {a.world_size} is not divisible by ETP x EP x PP = {grid}")
    moe = f", {a.num_experts} experts top-{a.moe_router_topk}" if a.num_experts else ""
    return (
        f"{len(argv)} tokens; TP {a.tensor_model_parallel_size} PP {a.pipeline_model_parallel_size} "
        f"EP {a.expert_model_parallel_size} SP {a.sequence_parallel} dist-opt {a.use_distributed_optimizer} "
        f"mb {a.micro_batch_size} gb {a.global_batch_size} recompute {a.recompute_granularity} "
        f"bf16 {a.bf16} iters {a.train_iters}{moe}{extras(a)}"
    )


def extras(a):
    """The layout switches beyond the common ones, when the script sets them."""
    out = ""
    if a.decoder_first_pipeline_num_layers:
        out += f", stages {a.decoder_first_pipeline_num_layers}/…/{a.decoder_last_pipeline_num_layers} layers"
    if getattr(a, "virtual_pipeline_model_parallel_size", None):
        out += f", {a.virtual_pipeline_model_parallel_size} virtual stages"
    if a.num_experts:
        out += f", ETP {a.expert_tensor_parallel_size}"
    if a.multi_latent_attention:
        out += ", MLA"
    if a.optimizer_cpu_offload:
        out += ", optimizer on CPU"
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = os.environ.get("MEGATRON_LM", "")
    if not os.path.isfile(os.path.join(root, "megatron", "training", "arguments.py")):
        print("skipped: set MEGATRON_LM to a Megatron-LM checkout (pip's megatron-core has no megatron/training)")
        return 77
    files = sorted(glob.glob(os.path.join(sys.argv[1], "megatron_*.sh")))
    stub = missing(["torch"])
    if stub:
        absent = missing(STUBBED)
        print(f"torch not importable: stand-in modules for {', '.join(absent)}")
        sys.meta_path.insert(0, _StubFinder(set(absent)))
    if not hasattr(typing, "override"):  # Megatron-LM imports typing.override (Python 3.12)
        typing.override = lambda f: f
    sys.path.insert(0, root)
    from megatron.training import arguments

    if stub:
        # validate_args asks the card for the grouped-GEMM and CUDA_DEVICE_MAX_CONNECTIONS
        # rules: answered as a Hopper card (compute capability 9.0), the cards planned
        import torch

        torch.cuda.get_device_capability = lambda *a: (9, 0)
        torch.cuda.is_available = lambda: True
        arguments.get_device_arch_version = lambda: 9
    parse_args, validate_args = arguments.parse_args, arguments.validate_args

    failed = 0
    # the check can fail: a global batch one too large for micro-batch x DP is refused
    for path in files:
        text = open(path).read()
        argv = script_args(text)
        gb = flag(argv, "--global-batch-size")
        if flag(argv, "--micro-batch-size") * int(re.search(r" x DP (\d+)", text).group(1)) > 1:
            argv[argv.index("--global-batch-size") + 1] = str(gb + 1)
            try:
                validated(argv, world(text), parse_args, validate_args)
                print(f"FAIL control: validate_args accepted global batch {gb + 1} in {os.path.basename(path)}")
                failed += 1
            except AssertionError:
                print(f"ok control: global batch {gb + 1} refused for {os.path.basename(path)}")
            break
    # and the expert grid can fail: an expert-TP size of twice the world does not divide it
    for path in files:
        text = open(path).read()
        m = re.search(r"--expert-tensor-parallel-size (\d+)", text)
        if m:
            bad = 2 * world(text)
            text = text.replace(m.group(0), f"--expert-tensor-parallel-size {bad}")
            try:
                check_text(text, parse_args, validate_args)
                print(f"FAIL control: expert-TP {bad} accepted in {os.path.basename(path)}")
                failed += 1
            except AssertionError:
                print(f"ok control: expert-TP {bad} refused for {os.path.basename(path)}")
            break
    for path in files:
        name = os.path.basename(path)
        try:
            print(f"ok {name}: {check(path, parse_args, validate_args)}")
        except SystemExit as e:
            failed += 1
            print(f"FAIL {name}: argparse exited ({e.code})")
        except Exception as e:  # noqa: BLE001 - report and go on
            failed += 1
            print(f"FAIL {name}: {e}")
    print(f"{len(files) - failed} of {len(files)} scripts parsed by {root}")
    return 1 if failed or not files else 0


if __name__ == "__main__":
    sys.exit(main())
