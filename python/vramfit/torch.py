"""The guard inside a PyTorch job: check the fit before step 1, explain an OOM.

``preflight(model, optimizer, batch=..., seq=...)`` reads the live module (parameter
shapes and dtypes, which require grad, PEFT LoRA adapters and their rank, bitsandbytes
4/8-bit layers, gradient checkpointing), the optimizer (its kind, foreach/fused, the dtypes
of its states), the world size and ZeRO/FSDP wrapping, and the GPU; it maps them onto
``vramfit estimate``'s flags (the model's own ``config.json``, the PEFT
``adapter_config.json``) and returns the estimate with "fits / does not fit: the largest
micro-batch that fits is N". Every figure comes from vramfit's estimate: this module only
reads the job and formats the answer.

``on_oom(out_dir)`` records the allocator's history (bounded) and installs PyTorch's OOM
observer: on an OOM the rank dumps its snapshot, runs vramfit's snapshot diagnosis
in-process, prints the verdict, and writes the merged cross-rank report.

torch is imported when a function runs, never at ``import vramfit``.
"""

import json
import os
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, TextIO, Tuple, Union

from . import _native
from ._call import call as _call
from ._errors import InputError
from ._call import text as _text

# torch dtype name -> vramfit --dtype
_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}

# optimizer class name -> vramfit --optimizer (docs/training.md); states are sized by the kind
_OPTIMIZERS = {
    "AdamW": "adamw",
    "Adam": "adamw",
    "FusedAdam": "adamw",
    "FusedAdamW": "adamw",
    "DeepSpeedCPUAdam": "adamw",
    "AdamW32bit": "adamw",
    "PagedAdamW": "adamw",
    "PagedAdamW32bit": "adamw",
    "AdamW8bit": "adamw-8bit",
    "Adam8bit": "adamw-8bit",
    "PagedAdamW8bit": "paged-adamw-8bit",
    "PagedAdam8bit": "paged-adamw-8bit",
    "Adafactor": "adafactor",
    "Lion": "lion",
    "Lion8bit": "lion",
}


class OutOfMemoryPredicted(RuntimeError):
    """Raised by ``preflight(..., raise_on_fail=True)`` when the job does not fit."""

    def __init__(self, result: "Preflight") -> None:
        super().__init__(str(result))
        self.result = result


def _torch():
    import torch  # noqa: PLC0415 -- lazily: vramfit works without torch

    return torch


def _class_names(obj: Any) -> List[str]:
    return [c.__name__ for c in type(obj).__mro__]


def _unwrap(model: Any) -> Tuple[Any, Dict[str, Any]]:
    """The user's module under DDP / DeepSpeed / FSDP1 / torch.compile wrappers, and what
    the wrappers say about sharding."""
    found: Dict[str, Any] = {}
    seen = 0
    while seen < 8:
        seen += 1
        names = _class_names(model)
        if "DeepSpeedEngine" in names:
            try:
                found["zero"] = int(model.zero_optimization_stage())
            except Exception:  # noqa: BLE001 -- an engine without the method: no stage read
                pass
            model = model.module
        elif "FullyShardedDataParallel" in names:
            strategy = getattr(getattr(model, "sharding_strategy", None), "name", "FULL_SHARD")
            found["fsdp"] = {
                "FULL_SHARD": "full-shard",
                "HYBRID_SHARD": "full-shard",
                "SHARD_GRAD_OP": "shard-grad-op",
                "_HYBRID_SHARD_ZERO2": "shard-grad-op",
            }.get(strategy)
            found["fsdp_strategy"] = strategy
            model = model.module
        elif "DistributedDataParallel" in names or "DataParallel" in names:
            model = model.module
        elif "OptimizedModule" in names and hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            break
    # FSDP2 (fully_shard) turns the module's class into FSDP<Class>, an FSDPModule
    if "fsdp" not in found and any("FSDPModule" in _class_names(m) for m in model.modules()):
        found["fsdp"] = "full-shard"
        found["fsdp_strategy"] = "fully_shard (FSDP2)"
    return model, found


def _jsonable(v: Any) -> Any:
    if isinstance(v, (set, frozenset, tuple)):
        return sorted(v) if all(isinstance(i, str) for i in v) else list(v)
    if hasattr(v, "value") and isinstance(getattr(v, "value"), (str, int)):  # enums (PeftType, TaskType)
        return v.value
    return str(v)


def describe(model: Any, optimizer: Any = None) -> Dict[str, Any]:
    """What preflight reads from a live module and optimizer (no figure is computed here)."""
    torch = _torch()
    inner, wrapping = _unwrap(model)
    d: Dict[str, Any] = {"wrapping": wrapping, "notes": []}

    # PEFT: the adapters and the base model underneath
    peft_configs = getattr(inner, "peft_config", None)
    base = inner
    if isinstance(peft_configs, dict) and peft_configs:
        active = getattr(inner, "active_adapter", None)
        if isinstance(active, (list, tuple)):
            active = active[0] if active else None
        name = active if active in peft_configs else next(iter(peft_configs))
        cfg = peft_configs[name]
        d["peft"] = {
            "adapter": name,
            "type": _jsonable(getattr(cfg, "peft_type", None)),
            "rank": getattr(cfg, "r", None),
            "target_modules": _jsonable(getattr(cfg, "target_modules", None)),
            "config": json.loads(json.dumps(cfg.to_dict(), default=_jsonable)),
        }
        if hasattr(inner, "get_base_model"):
            base = inner.get_base_model()
    config = getattr(base, "config", None)
    if not hasattr(config, "to_json_string"):
        # a LightningModule or a plain nn.Module holding a transformers model
        for m in base.modules():
            if hasattr(getattr(m, "config", None), "to_json_string"):
                base, config = m, m.config
                break
    d["config"] = json.loads(config.to_json_string()) if hasattr(config, "to_json_string") else None
    d["name"] = getattr(config, "_name_or_path", None) or type(base).__name__

    # parameters: counts by dtype, trainable or not; adapters apart
    by_dtype: Counter = Counter()
    trainable: Counter = Counter()
    adapter_dtypes: Counter = Counter()
    for n, p in inner.named_parameters():
        # ZeRO-3 partitions parameters to 0-element placeholders and keeps the size in ds_numel
        numel = int(getattr(p, "ds_numel", None) or p.numel())
        dt = str(p.dtype).replace("torch.", "")
        if "lora_" in n:
            adapter_dtypes[dt] += numel
            continue
        by_dtype[dt] += numel
        if p.requires_grad:
            trainable[dt] += numel
    d["params_by_dtype"] = dict(by_dtype)
    d["trainable_by_dtype"] = dict(trainable)
    d["adapter_params_by_dtype"] = dict(adapter_dtypes)

    # bitsandbytes layers, by class name (bitsandbytes need not be importable to read them)
    bnb4, bnb8, quant_types, nested = 0, 0, set(), set()
    for m in inner.modules():
        names = _class_names(m)
        if "Linear4bit" in names:
            bnb4 += 1
            qs = getattr(getattr(m, "weight", None), "quant_state", None)
            qt = getattr(qs, "quant_type", None) or getattr(getattr(m, "weight", None), "quant_type", None)
            if qt:
                quant_types.add(str(qt))
            if qs is not None:
                nested.add(bool(getattr(qs, "nested", False)))
            elif getattr(getattr(m, "weight", None), "compress_statistics", None) is not None:
                nested.add(bool(m.weight.compress_statistics))
        elif "Linear8bitLt" in names:
            bnb8 += 1
    d["bnb_4bit_layers"] = bnb4
    d["bnb_8bit_layers"] = bnb8
    d["bnb_4bit_quant_types"] = sorted(quant_types)
    d["bnb_4bit_double_quant"] = sorted(nested)
    # transformers 5 renamed it (is_gradient_checkpointing is deprecated there)
    ckpt = "is_activation_checkpointing" if hasattr(type(base), "is_activation_checkpointing") else "is_gradient_checkpointing"
    d["gradient_checkpointing"] = bool(getattr(base, ckpt, False))

    # the optimizer
    if optimizer is not None:
        opt = getattr(optimizer, "optimizer", optimizer)  # accelerate / DeepSpeed wrappers
        cls = type(opt).__name__
        kind = _OPTIMIZERS.get(cls)
        defaults = getattr(opt, "defaults", {}) or {}
        if cls == "SGD":
            kind = "sgd-momentum" if defaults.get("momentum", 0) else "sgd"
        state_dtypes: Counter = Counter()
        for st in getattr(opt, "state", {}).values():
            for v in st.values() if isinstance(st, dict) else []:
                if torch.is_tensor(v) and v.dim() > 0:
                    state_dtypes[str(v.dtype).replace("torch.", "")] += int(v.numel())
        d["optimizer"] = {
            "class": cls,
            "kind": kind,
            "foreach": defaults.get("foreach"),
            "fused": defaults.get("fused"),
            "state_elements_by_dtype": dict(state_dtypes),
        }

    # the world
    ws = 1
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        ws = dist.get_world_size()
        d["rank"] = dist.get_rank()
    else:
        ws = int(os.environ.get("WORLD_SIZE", "1") or 1)
        d["rank"] = int(os.environ.get("RANK", "0") or 0)
    d["world_size"] = ws
    return d


def _largest_dtype(by_dtype: Dict[str, int]) -> Optional[str]:
    floats = {k: v for k, v in by_dtype.items() if k in _DTYPES}
    return _DTYPES[max(floats, key=floats.get)] if floats else None


def estimate_args(d: Dict[str, Any], *, batch: Optional[int], seq: Optional[int]) -> Tuple[Dict[str, Any], List[str]]:
    """The ``vramfit.estimate`` keyword arguments for a described job (without the model
    file and the GPU), and notes on what was assumed."""
    notes: List[str] = []
    a: Dict[str, Any] = {"batch": batch, "context": seq}
    lora = "peft" in d and str(d["peft"].get("type", "")).upper() == "LORA"
    trainable = sum(d["trainable_by_dtype"].values())
    base_dtype = _largest_dtype(d["params_by_dtype"])
    if "peft" in d and not lora:
        notes.append(f"PEFT adapter type {d['peft'].get('type')} is not LoRA: sized as a full fine-tune of the trainable parameters")
    if lora and d["bnb_4bit_layers"]:
        a["task"] = "qlora"
        qts = d["bnb_4bit_quant_types"]
        if qts:
            a["bnb_4bit_type"] = "fp4" if qts == ["fp4"] else "nf4"
        if d["bnb_4bit_double_quant"] == [False]:
            a["no_double_quant"] = True
        # prepare_model_for_kbit_training casts the non-quantized weights to fp32
        if base_dtype != "fp32":
            a["no_kbit_prep"] = True
    elif lora:
        a["task"] = "lora"
        a["dtype"] = base_dtype
        if d["bnb_8bit_layers"]:
            notes.append("8-bit (LLM.int8) LoRA bases are not modelled: sized with a 16-bit base, an over-estimate of the weights")
            a["dtype"] = "bf16"
    elif trainable:
        a["task"] = "train"
        if base_dtype == "bf16":
            a["dtype"] = "bf16"  # pure bf16 weights, grads and states
        elif base_dtype == "fp16":
            a["precision"] = "mixed-fp16"
            notes.append("fp16 parameters in training: sized as mixed-fp16 (fp16 weights with fp32 master weights)")
        else:
            notes.append("fp32 parameters: sized with autocast bf16 (amp-bf16, the Trainer's bf16=True); pass precision='fp32' for no autocast")
    else:
        a["task"] = "infer"
        if d["bnb_4bit_layers"]:
            a["dtype"] = "nf4"
        elif d["bnb_8bit_layers"]:
            a["dtype"] = "int8"
        else:
            a["dtype"] = base_dtype
    if lora:
        adapter = _largest_dtype(d["adapter_params_by_dtype"])
        if adapter:
            a["adapter_dtype"] = "fp32" if adapter == "fp32" else "bf16"
    if a["task"] != "infer":
        a["checkpointing"] = "full" if d["gradient_checkpointing"] else "none"
        opt = d.get("optimizer")
        if opt:
            if opt["kind"]:
                a["optimizer"] = opt["kind"]
            else:
                notes.append(f"optimizer {opt['class']} is not one vramfit models: sized as AdamW")
            if opt.get("foreach") is False or opt.get("fused"):
                a["no_foreach"] = True
            odd = {k for k in opt["state_elements_by_dtype"] if k not in ("float32", "uint8", "int8")}
            if odd:
                notes.append(f"optimizer states held in {', '.join(sorted(odd))}: vramfit sizes states by the optimizer kind")
    w = d["wrapping"]
    if d["world_size"] > 1:
        a["gpus"] = d["world_size"]
    if "zero" in w and w["zero"]:
        a["zero"] = w["zero"]
    if w.get("fsdp"):
        a["fsdp"] = w["fsdp"]
    elif w.get("fsdp_strategy") == "NO_SHARD":
        notes.append("FSDP NO_SHARD: sized as plain data parallelism")
    if a["task"] == "infer":
        for k in ("checkpointing",):
            a.pop(k, None)
    return {k: v for k, v in a.items() if v is not None}, notes


def _this_gpu(world_size: int) -> Tuple[Dict[str, Any], Dict[str, Any], List[str]]:
    """The card to fit on: (estimate arguments, environment for the call, notes)."""
    torch = _torch()
    if not torch.cuda.is_available():
        return {}, {}, ["no CUDA device: the estimate is not fitted to a card (pass gpu='h100' or gpu_mem='80GiB')"]
    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    uuid = getattr(props, "uuid", None)
    if world_size == 1 and uuid is not None:
        # vramfit's --gpu auto reads this GPU's free memory through NVML; NVML ignores
        # CUDA_VISIBLE_DEVICES' renumbering, so name the device by its UUID
        return {"gpu": "auto"}, {"CUDA_VISIBLE_DEVICES": f"GPU-{uuid}" if not str(uuid).startswith("GPU-") else str(uuid)}, []
    total = None
    try:
        import pynvml  # optional: nvidia-ml-py

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}".encode()) if uuid else pynvml.nvmlDeviceGetHandleByIndex(dev)
        total = int(pynvml.nvmlDeviceGetMemoryInfo(h).total)
    except Exception:  # noqa: BLE001 -- no pynvml or no NVML: CUDA's total, which is smaller
        total = int(props.total_memory)
    mib = total // (1 << 20)
    return (
        {"gpu_mem": f"{mib}MiB"},
        {},
        [f"{world_size} ranks: each fitted against the card's total ({mib} MiB), not its free memory now (vramfit's --gpu auto fits one process's GPUs)"],
    )


class Preflight:
    """The answer of ``preflight``: the estimate and its verdict."""

    def __init__(self, estimate: Dict[str, Any], arguments: Dict[str, Any], described: Dict[str, Any], notes: List[str]):
        self.estimate = estimate
        self.arguments = arguments
        self.described = described
        self.notes = notes
        fit = estimate.get("fit") or {}
        self.fits: Optional[bool] = fit.get("fits")
        self.verdict: Optional[str] = fit.get("verdict")
        self.gpu: Optional[str] = fit.get("gpu")
        self.required_bytes: int = estimate["per_gpu"]["total_bytes"]
        self.usable_bytes: Optional[int] = fit.get("usable_bytes")
        self.largest_micro_batch: Optional[int] = None
        self.largest_seq: Optional[int] = None
        sweep = estimate.get("sweep") or {}
        knobs = {l["knob"]: l for l in sweep.get("largest", [])}
        # the sweep's bisection (vramfit estimate --sweep); no value: not even 1 fits
        if "micro_batch" in knobs:
            self.largest_micro_batch = knobs["micro_batch"]["value"] or 0
        if "context" in knobs:
            self.largest_seq = knobs["context"]["value"] or 0

    def __bool__(self) -> bool:
        return self.fits is not False

    def __str__(self) -> str:
        gib = lambda b: f"{b / (1 << 30):.2f} GiB"  # noqa: E731 -- formatting only
        if self.fits is None:
            head = f"vramfit preflight: needs {gib(self.required_bytes)} per GPU (no card to fit on)"
        else:
            word = "fits" if self.fits else "does not fit"
            if self.verdict == "tight":
                word = "does not fit (tight: the tensors fit, the allocator's overhead does not)"
            head = f"vramfit preflight: {word} on {self.gpu}: needs {gib(self.required_bytes)} of {gib(self.usable_bytes or 0)} usable"
        tail = []
        if self.largest_micro_batch is not None:
            if self.largest_micro_batch == 0:
                tail.append("no micro-batch fits at this sequence length")
            else:
                tail.append(f"the largest micro-batch that fits is {self.largest_micro_batch}")
        return head + (": " + "; ".join(tail) if tail else "")

    def __repr__(self) -> str:
        return f"<{self}>"

    def to_dict(self) -> Dict[str, Any]:
        return {
            "fits": self.fits,
            "verdict": self.verdict,
            "gpu": self.gpu,
            "required_bytes": self.required_bytes,
            "usable_bytes": self.usable_bytes,
            "largest_micro_batch": self.largest_micro_batch,
            "largest_seq": self.largest_seq,
            "arguments": self.arguments,
            "described": self.described,
            "notes": self.notes,
            "estimate": self.estimate,
        }


_ENV_LOCK = threading.Lock()


def preflight(
    model: Any,
    optimizer: Any = None,
    *,
    batch: Optional[int] = None,
    seq: Optional[int] = None,
    gpu: Optional[str] = None,
    gpu_mem: Optional[str] = None,
    raise_on_fail: bool = False,
    quiet: bool = False,
    stream: Optional[TextIO] = None,
    **flags: Any,
) -> Preflight:
    """Will this job fit? Reads the live ``model`` (and ``optimizer``) and asks vramfit.

    ``batch`` is the micro-batch per GPU, ``seq`` the tokens per sequence. ``gpu`` /
    ``gpu_mem`` name the card (default: this process's CUDA device, through NVML). Any
    other keyword is a flag of ``vramfit estimate`` and overrides what was read
    (``precision='fp32'``, ``loss='fused'``, ``deepspeed='ds_config.json'``).

    Returns a :class:`Preflight` (``.fits``, ``.largest_micro_batch``, ``.estimate``: the
    ``vramfit estimate --json`` document with the sweep). With ``raise_on_fail`` it raises
    :class:`OutOfMemoryPredicted` before step 1 when the job does not fit.

    Example::

        model = AutoModelForCausalLM.from_pretrained(...)
        opt = torch.optim.AdamW(model.parameters())
        print(vramfit.torch.preflight(model, opt, batch=8, seq=2048, raise_on_fail=True))
    """
    d = describe(model, optimizer)
    if d["config"] is None:
        raise ValueError(
            "preflight sizes models from their config: this module has no transformers-style .config "
            "(give flags of vramfit.estimate instead, or wrap a transformers model)"
        )
    args, notes = estimate_args(d, batch=batch, seq=seq)
    env: Dict[str, str] = {}
    if gpu is not None or gpu_mem is not None:
        args.update({"gpu": gpu, "gpu_mem": gpu_mem})
    else:
        g, env, gnotes = _this_gpu(d["world_size"])
        args.update(g)
        notes.extend(gnotes)
    for k, v in flags.items():
        if k == "precision" and args.get("task") == "train" and "dtype" in args:
            notes.append(f"precision={v!r} ignored: the parameters are {args['dtype']}, so weights, gradients and states are")
            continue
        args[k] = v
    args["sweep"] = bool(args.get("gpu") or args.get("gpu_mem"))
    with tempfile.TemporaryDirectory(prefix="vramfit-preflight-") as tmp:
        cfg = Path(tmp) / "config.json"
        cfg.write_text(json.dumps(d["config"]))
        call_args = dict(args, model=str(cfg), offline=True)
        if "peft" in d and args.get("task") in ("lora", "qlora") and "adapter_config" not in flags:
            ac = Path(tmp) / "adapter_config.json"
            ac.write_text(json.dumps(d["peft"]["config"]))
            call_args["adapter_config"] = str(ac)
        try:
            est = _estimate_with_env(call_args, env)
        except InputError as e:
            if call_args.get("gpu") != "auto" or gpu is not None:
                raise
            # no NVML in this container: the card's total as CUDA reports it (smaller than
            # nvidia-smi's, so the fit errs towards "does not fit"), and say so
            total_mib = _torch().cuda.get_device_properties(_torch().cuda.current_device()).total_memory >> 20
            call_args.pop("gpu")
            call_args["gpu_mem"] = f"{total_mib}MiB"
            notes.append(f"--gpu auto failed ({e.message}): fitted against CUDA's total {total_mib} MiB, not the free memory")
            est = _estimate_with_env(call_args, {})
    shown = {k: v for k, v in call_args.items() if k not in ("model", "adapter_config", "offline")}
    result = Preflight(est, shown, d, notes)
    if not quiet and d.get("rank", 0) == 0:
        out = stream or sys.stderr
        print(str(result), file=out)
        for n in notes:
            print(f"  note: {n}", file=out)
    if raise_on_fail and result.fits is False:
        raise OutOfMemoryPredicted(result)
    return result


def _estimate_with_env(call_args: Dict[str, Any], env: Dict[str, str]) -> Dict[str, Any]:
    """``vramfit.estimate`` with ``env`` set for the call (vramfit reads CUDA_VISIBLE_DEVICES)."""
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return _call("estimate", call_args)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class OomHandler:
    """What ``on_oom`` installed. ``handle()`` runs the OOM path by hand (tests, or after
    catching ``torch.OutOfMemoryError`` yourself)."""

    def __init__(self, out_dir: Union[str, os.PathLike], max_entries: int, rank: Optional[int], stream: Optional[TextIO]):
        self.out_dir = Path(out_dir)
        self.max_entries = max_entries
        self._rank = rank
        self.stream = stream
        self.installed = False
        self.last: Optional[Dict[str, Any]] = None

    @property
    def rank(self) -> int:
        if self._rank is not None:
            return self._rank
        torch = _torch()
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank()
        return int(os.environ.get("RANK", "0") or 0)

    def install(self) -> "OomHandler":
        torch = _torch()
        if not torch.cuda.is_available():
            print("vramfit.torch.on_oom: no CUDA device: nothing to watch", file=self.stream or sys.stderr)
            return self
        torch.cuda.memory._record_memory_history(max_entries=self.max_entries, stacks="python")
        torch._C._cuda_attach_out_of_memory_observer(self._observer)
        self.installed = True
        return self

    def uninstall(self) -> None:
        if self.installed:
            _torch().cuda.memory._record_memory_history(enabled=None)
            self.installed = False

    def _observer(self, device: int, alloc: int, device_alloc: int, device_free: int) -> None:
        try:
            self.handle(device=device)
        except Exception as e:  # noqa: BLE001 -- never hide the OOM itself behind our failure
            print(f"vramfit: could not explain the OOM: {e}", file=self.stream or sys.stderr)

    def handle(self, snapshot: Optional[Union[str, os.PathLike]] = None, device: Optional[int] = None) -> Dict[str, Any]:
        """Dump (or take) this rank's snapshot, diagnose it, print the verdict, and write
        ``rank<N>.pickle``, ``rank<N>.diagnosis.json``, ``rank<N>.txt`` and the merged
        ``ranks.json`` / ``ranks.txt`` into ``out_dir``. Returns the diagnosis document."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        r = self.rank
        path = self.out_dir / f"rank{r}.pickle"
        if snapshot is None:
            _torch().cuda.memory._dump_snapshot(str(path))
        else:
            path.write_bytes(Path(snapshot).read_bytes())
        doc = _call("diagnose", {"file": str(path)})
        report = _text("diagnose", {"file": str(path)})
        _atomic_write(self.out_dir / f"rank{r}.diagnosis.json", json.dumps(doc))
        _atomic_write(self.out_dir / f"rank{r}.txt", report)
        merged = merge_ranks(self.out_dir)
        out = self.stream or sys.stderr
        print(f"vramfit: rank {r} ran out of memory{'' if device is None else f' on cuda:{device}'}; snapshot {path}", file=out)
        print(report.rstrip("\n"), file=out)
        if merged is not None and len(merged["ranks"]) > 1:
            for f in merged["findings"]:
                print(f"vramfit: across ranks: {f}", file=out)
        out.flush()
        self.last = doc
        return doc


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def merge_ranks(out_dir: Union[str, os.PathLike]) -> Optional[Dict[str, Any]]:
    """The cross-rank report of every ``rank<N>.diagnosis.json`` in ``out_dir`` (written to
    ``ranks.json`` and ``ranks.txt``); None when there is none."""
    out = Path(out_dir)
    docs = []
    for p in sorted(out.glob("rank*.diagnosis.json")):
        try:
            rank = int(p.name[len("rank"):].split(".")[0])
        except ValueError:
            continue
        docs.append((rank, p.read_text()))
    if not docs:
        return None
    merged = json.loads(_native.merge_ranks(docs))
    _atomic_write(out / "ranks.json", json.dumps(merged, indent=2))
    _atomic_write(out / "ranks.txt", format_ranks(merged))
    return merged


def format_ranks(m: Dict[str, Any]) -> str:
    """The merged report as text."""
    mib = lambda b: "-" if b is None else f"{b / (1 << 20):,.1f} MiB"  # noqa: E731 -- formatting only
    lines = [f"vramfit: {len(m['ranks'])} rank(s); imbalance flagged above {m['imbalance_threshold_percent']} % of the highest peak"]
    lines.append(f"{'rank':>5} {'peak allocated':>16} {'peak reserved':>16} {'OOM request':>14}  class / top site")
    for r in m["ranks"]:
        lines.append(
            f"{r['rank']:>5} {mib(r['peak_allocated_bytes']):>16} {mib(r['peak_reserved_bytes']):>16} "
            f"{mib(r['oom_requested_bytes']):>14}  {r['oom_class'] or '-'} / {r['top_site'] or '-'}"
        )
    lines.extend(m["findings"])
    return "\n".join(lines) + "\n"


def on_oom(
    out_dir: Union[str, os.PathLike] = "vramfit-oom",
    *,
    max_entries: int = 100_000,
    rank: Optional[int] = None,
    stream: Optional[TextIO] = None,
) -> OomHandler:
    """Explain an OOM when it happens: records the allocator history (at most
    ``max_entries`` events, Python stacks) and attaches PyTorch's OOM observer. On an OOM
    this rank dumps its snapshot into ``out_dir``, vramfit diagnoses it in-process, the
    verdict is printed (to stderr), and ``ranks.json`` / ``ranks.txt`` merge every rank's
    diagnosis found in ``out_dir`` (a shared directory: every rank writes its own files)
    and flag imbalance between ranks.

    Example::

        vramfit.torch.on_oom("oom-report")     # before the training loop
    """
    return OomHandler(out_dir, max_entries, rank, stream).install()
