#!/usr/bin/env python3
"""Measure the memory of one training step (or a bf16 prefill) the way
shared/calibration/README.md describes, and print one JSONL record per case.

CPU (no GPU): the model is built from a config inside FakeTensorMode (exact
shapes, dtypes and aliasing, no storage) and the step is tracked by
torch.distributed._tools.mem_tracker.MemTracker (categories Parameter,
Buffer, Gradient, Activation, Temp, Optstate, Other). SDPA dispatches to the
CPU fused flash kernel, which keeps what the CUDA flash kernel keeps
(q, k, v, output, logsumexp; no seq x seq matrix).

GPU (when torch.cuda.is_available() and --device cuda): real tensors, and
the record also carries torch.cuda.max_memory_allocated() as peak_total and
torch.cuda.memory_reserved() as memory_reserved.

Usage:
    python measure.py --list
    python measure.py --case tinyllama_lora_qv_b4_s512 >> ../data/vramfit-cases.jsonl
    python measure.py --all >> ../data/vramfit-cases.jsonl
"""

import argparse
import json
import platform
import sys
import time

import torch

# .to() inside FakeTensorMode (PEFT moves adapters to the base dtype) needs
# parameters replaced, not swapped in place.
torch.__future__.set_overwrite_module_params_on_conversion(True)
torch.__future__.set_swap_module_params_on_conversion(False)

ARCHS = {
    "tinyllama-1.1b": {
        "family": "llama", "hidden_size": 2048, "num_hidden_layers": 22, "num_attention_heads": 32,
        "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000,
        "max_position_embeddings": 8192, "tie_word_embeddings": False, "rms_norm_eps": 1e-05,
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "rope_theta": 10000.0,
        "attention_dropout": 0.0,
    },
    "qwen2.5-0.5b": {
        "family": "qwen2", "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
        "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936,
        "max_position_embeddings": 32768, "tie_word_embeddings": True, "rms_norm_eps": 1e-06,
        "hidden_act": "silu", "rope_theta": 1000000.0, "attention_dropout": 0.0,
        "use_sliding_window": False,
    },
    "gpt2-124m": {
        "family": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
        "n_positions": 1024, "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.1,
        # attn_pdrop 0: CPU SDPA has no fused kernel with dropout (it falls back to the math
        # kernel, which keeps seq x seq tensors a GPU would not); residual dropout stays on
        "embd_pdrop": 0.1, "attn_pdrop": 0.0, "tie_word_embeddings": True,
    },
    "phi-3-mini": {
        "family": "phi3", "hidden_size": 3072, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 32064,
        "max_position_embeddings": 4096, "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": False,
        "attention_dropout": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "rope_theta": 10000.0,
        "sliding_window": 2047,
    },
    "pythia-160m": {
        "family": "gpt_neox", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "vocab_size": 50304, "max_position_embeddings": 2048,
        "rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": True,
        "hidden_act": "gelu", "layer_norm_eps": 1e-05, "tie_word_embeddings": False,
        "attention_dropout": 0.0, "hidden_dropout": 0.0, "attention_bias": True,
    },
}

QV = ["q_proj", "v_proj"]
ALL_LLAMA = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# id -> setup. precision: fp32 | amp-bf16 | bf16 ; base_dtype: storage of the (frozen) weights
CASES = {
    # cross-check of the method against shared/calibration (same setup as
    # C_tinyllama-1.1b_b_amp_bf16_b4_s2048_sdpa_ckpt0 there)
    "tinyllama_full_amp_b4_s2048_crosscheck": dict(model="tinyllama-1.1b", task="train", precision="amp-bf16",
                                                   batch=4, seq=2048),
    "tinyllama_lora_qv_r16_b4_s512": dict(model="tinyllama-1.1b", task="lora", precision="amp-bf16",
                                         base_dtype="bf16", batch=4, seq=512,
                                         lora=dict(r=16, lora_alpha=32, target_modules=QV, lora_dropout=0.0)),
    "tinyllama_lora_all_r16_b4_s1024": dict(model="tinyllama-1.1b", task="lora", precision="amp-bf16",
                                           base_dtype="bf16", batch=4, seq=1024,
                                           lora=dict(r=16, lora_alpha=32, target_modules=ALL_LLAMA,
                                                     lora_dropout=0.0)),
    "tinyllama_lora_all_r64_drop_b2_s1024": dict(model="tinyllama-1.1b", task="lora", precision="amp-bf16",
                                                base_dtype="bf16", batch=2, seq=1024,
                                                lora=dict(r=64, lora_alpha=128, target_modules=ALL_LLAMA,
                                                          lora_dropout=0.05)),
    "tinyllama_lora_all_r16_ckpt_b4_s2048": dict(model="tinyllama-1.1b", task="lora", precision="amp-bf16",
                                                base_dtype="bf16", batch=4, seq=2048, checkpointing="full",
                                                lora=dict(r=16, lora_alpha=32, target_modules=ALL_LLAMA,
                                                          lora_dropout=0.0)),
    "tinyllama_full_amp_eager_b1_s2048": dict(model="tinyllama-1.1b", task="train", precision="amp-bf16",
                                              batch=1, seq=2048, attention="eager"),
    # Megatron-style selective recompute: only the attention core (scores, softmax) is
    # checkpointed; transformers has no such mode, so the harness registers one.
    "tinyllama_full_amp_eager_selective_b1_s2048": dict(model="tinyllama-1.1b", task="train",
                                                        precision="amp-bf16", batch=1, seq=2048,
                                                        attention="eager_selective", checkpointing="selective"),
    "tinyllama_full_amp_eager_selective_b4_s2048": dict(model="tinyllama-1.1b", task="train",
                                                        precision="amp-bf16", batch=4, seq=2048,
                                                        attention="eager_selective", checkpointing="selective"),
    "tinyllama_lora_all_r16_purebf16_b4_s1024": dict(model="tinyllama-1.1b", task="lora", precision="bf16",
                                                     base_dtype="bf16", batch=4, seq=1024,
                                                     lora=dict(r=16, lora_alpha=32, target_modules=ALL_LLAMA,
                                                               lora_dropout=0.0)),
    "qwen2.5-0.5b_lora_all_r16_b4_s1024": dict(model="qwen2.5-0.5b", task="lora", precision="amp-bf16",
                                               base_dtype="bf16", batch=4, seq=1024,
                                               lora=dict(r=16, lora_alpha=32, target_modules=ALL_LLAMA,
                                                         lora_dropout=0.0)),
    # fp32 base under autocast: frozen weights are cast (not cached) and the casts saved
    "gpt2_lora_cattn_fp32base_b4_s1024": dict(model="gpt2-124m", task="lora", precision="amp-bf16",
                                              base_dtype="fp32", batch=4, seq=1024,
                                              lora=dict(r=8, lora_alpha=16, target_modules=["c_attn"],
                                                        lora_dropout=0.0, fan_in_fan_out=True)),
    "phi-3-mini_lora_all_r16_b1_s1024": dict(model="phi-3-mini", task="lora", precision="amp-bf16",
                                             base_dtype="bf16", batch=1, seq=1024,
                                             lora=dict(r=16, lora_alpha=32,
                                                       target_modules=["qkv_proj", "o_proj", "gate_up_proj",
                                                                       "down_proj"], lora_dropout=0.0)),
    "qwen2.5-0.5b_full_amp_b2_s1024": dict(model="qwen2.5-0.5b", task="train", precision="amp-bf16",
                                           batch=2, seq=1024),
    "qwen2.5-0.5b_full_bf16_b4_s1024": dict(model="qwen2.5-0.5b", task="train", precision="bf16",
                                            batch=4, seq=1024),
    "pythia-160m_full_amp_b4_s1024": dict(model="pythia-160m", task="train", precision="amp-bf16",
                                          batch=4, seq=1024),
}


def _gpu_like_dropout():
    """CPU dropout keeps a float mask of the input dtype; CUDA's fused
    native_dropout keeps a bool mask (1 B). Route F.dropout to native_dropout
    so fake CPU runs keep what a GPU keeps."""
    import torch.nn.functional as F
    if getattr(F.dropout, "_vramfit", False):
        return
    orig = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and 0.0 < p < 1.0 and not inplace:
            return torch.native_dropout(input, p, True)[0]
        return orig(input, p, training, inplace)

    dropout._vramfit = True
    F.dropout = dropout
    torch.nn.modules.dropout.F.dropout = dropout


def _register_selective():
    """An attention implementation that checkpoints only the eager attention core."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.llama.modeling_llama import eager_attention_forward
    import torch.utils.checkpoint as ckpt

    def eager_selective(module, query, key, value, attention_mask, **kw):
        def core(q, k, v, m):
            return eager_attention_forward(module, q, k, v, m, **kw)[0]
        return ckpt.checkpoint(core, query, key, value, attention_mask, use_reentrant=False), None

    ALL_ATTENTION_FUNCTIONS["eager_selective"] = eager_selective
    ALL_MASK_ATTENTION_FUNCTIONS.register("eager_selective", ALL_MASK_ATTENTION_FUNCTIONS["eager"])


def build_config(arch, attention="sdpa"):
    import transformers
    a = dict(arch)
    fam = a.pop("family")
    cls = transformers.AutoConfig.for_model(fam).__class__
    cfg = cls(**a)
    if attention == "eager_selective":
        _register_selective()
    cfg._attn_implementation = attention
    return cfg


def measure(case_id, setup, device):
    import transformers
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch._subclasses.fake_tensor import FakeTensorMode

    arch = ARCHS[setup["model"]]
    attention = setup.get("attention", "sdpa")
    cfg = build_config(arch, attention)
    prec = setup["precision"]
    base = setup.get("base_dtype")
    fake = device == "cpu"
    if fake:
        _gpu_like_dropout()
    ctx = FakeTensorMode() if fake else torch.device(device)
    t0 = time.time()
    with ctx:
        dtype = torch.bfloat16 if (prec == "bf16" or base == "bf16") else torch.float32
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        if not fake:
            model = model.to(device)
        model.train()
        lora = setup.get("lora")
        if lora:
            import peft
            import peft.tuners.tuners_utils as tu
            if fake:
                # Under FakeTensorMode the adapter's .to(base device) swap fails; everything is
                # on the CPU already and adapters stay fp32 (PEFT's autocast_adapter_dtype default).
                tu.BaseTunerLayer._move_adapter_to_device_of_base_layer = lambda self, *a, **k: None
                orig_to = torch.nn.Module.to
                torch.nn.Module.to = lambda self, *a, **k: self  # device moves only, all on CPU
            model = peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM", **lora))
            if fake:
                torch.nn.Module.to = orig_to
        if setup.get("checkpointing") == "full":  # "selective" is the attention implementation
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if lora:
                model.enable_input_require_grads()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-4, foreach=True, betas=(0.9, 0.999), weight_decay=0.01)
        ids = torch.randint(0, arch["vocab_size"], (setup["batch"], setup["seq"]),
                            device=None if fake else device)
    n_total = sum(p.numel() for p in model.parameters())
    n_train = sum(p.numel() for p in params)
    phases = {}
    _allow_frozen_params()
    mt = MemTracker()
    mt.track_external(model, opt)
    if not fake:
        torch.cuda.reset_peak_memory_stats()
    with ctx if fake else _null(), mt:
        def snap(name):
            cur = mt.get_tracker_snapshot("current")
            peak = mt.get_tracker_snapshot("peak")
            dev = next(iter(peak))
            phases[name] = {"peak_so_far": int(peak[dev]["Total"]), "current_after": int(cur[dev]["Total"]),
                            "current_after_breakdown": _cats(cur[dev])}
        if prec.startswith("amp"):
            dt = torch.bfloat16 if prec.endswith("bf16") else torch.float16
            with torch.autocast("cpu" if fake else "cuda", dtype=dt):
                out = model(input_ids=ids, labels=ids)
        else:
            out = model(input_ids=ids, labels=ids)
        loss = out.loss
        del out
        snap("forward")
        loss.backward()
        del loss
        snap("backward")
        opt.step()
        snap("optimizer_step")
        opt.zero_grad(set_to_none=True)
        snap("zero_grad")
    peak = mt.get_tracker_snapshot("peak")
    dev = next(iter(peak))
    total = int(peak[dev]["Total"])
    order = ["forward", "backward", "optimizer_step"]
    peak_phase = next(p for p in order if phases[p]["peak_so_far"] == total)
    rec = {
        "id": "V_" + case_id, "group": "C_train", "model": setup["model"], "arch": arch,
        "task": setup["task"], "precision": prec, "base_dtype": base,
        "optimizer": "torch.optim.AdamW(lr=1e-4, foreach=True, betas=(0.9,0.999), wd=0.01)",
        "batch": setup["batch"], "seq": setup["seq"],
        "checkpointing": setup.get("checkpointing", "none"),
        "gradient_checkpointing": setup.get("checkpointing") == "full",
        "attn_implementation": ("eager" if attention.startswith("eager") else
                                ("sdpa (CPU fused flash kernel)" if fake else "sdpa")),
        "dropout": "native_dropout (bool mask, as CUDA)" if fake else "cuda",
        "lora": setup.get("lora"),
        "params_total": int(n_total), "trainable_params": int(n_train),
        "peak_total": total, "peak_breakdown": _cats(peak[dev]),
        "peak_phase": peak_phase, "phases": phases,
        "method": "FakeTensorMode(cpu)+MemTracker" if fake else "cuda max_memory_allocated + MemTracker",
        "torch_version": torch.__version__, "transformers_version": transformers.__version__,
        "python": platform.python_version(), "wall_seconds": round(time.time() - t0, 1),
    }
    if lora:
        import peft
        rec["peft_version"] = peft.__version__
    if not fake:
        rec["peak_total_memtracker"] = total
        rec["peak_total"] = int(torch.cuda.max_memory_allocated())
        rec["memory_reserved"] = int(torch.cuda.memory_reserved())
    return rec


NAMES = {"PARAM": "Parameter", "BUFFER": "Buffer", "GRAD": "Gradient", "ACT": "Activation", "TEMP": "Temp",
         "OPT": "Optstate", "OTH": "Other", "Total": "Total"}


def _cats(d):
    return {NAMES.get(str(k).split(".")[-1], str(k)): int(v) for k, v in d.items()}


class _Handle:
    def remove(self):
        pass


def _allow_frozen_params():
    """MemTracker hooks every parameter's gradient; frozen (LoRA base) ones have none."""
    for name in ("register_hook", "register_post_accumulate_grad_hook"):
        orig = getattr(torch.Tensor, name)
        if getattr(orig, "_vramfit", False):
            continue

        def wrapped(self, hook, _orig=orig):
            if not self.requires_grad:
                return _Handle()
            return _orig(self, hook)

        wrapped._vramfit = True
        setattr(torch.Tensor, name, wrapped)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return
    ids = list(CASES) if a.all else a.case
    for cid in ids:
        if cid not in CASES:
            sys.exit(f"unknown case {cid}; --list shows them")
        rec = measure(cid, CASES[cid], a.device)
        print(json.dumps(rec), flush=True)
        print(f"{cid}: peak {rec['peak_total']} at {rec['peak_phase']}", file=sys.stderr)


if __name__ == "__main__":
    main()
