"""vramfit.torch with real torch on CPU: pre-flight on meta-device models built by
transformers (plain, PEFT LoRA, a bitsandbytes-shaped QLoRA model), compared with
vramfit's own estimate of the same config; the OOM handler on recorded snapshot
fixtures; the callbacks. A separate command (docs/python.md "The guard's tests"):

    python -m pytest python/tests/test_torch.py

needs torch, transformers and peft (and lightning for its callback test); skipped
without them.
"""

import io
import json
import os
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import vramfit  # noqa: E402
import vramfit.torch as guard  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "crates/diagnose/tests/fixtures/snapshot"
LLAMA = ROOT / "crates/ingest/tests/fixtures/configs/01_llama-3.1-8b.json"

os.environ["HF_HUB_OFFLINE"] = "1"


def meta_model(config_path=LLAMA, dtype=torch.bfloat16, **overrides):
    cfg = transformers.AutoConfig.from_pretrained(str(config_path.parent), **overrides) if config_path.is_dir() else None
    if cfg is None:
        d = json.loads(config_path.read_text())
        d.update(overrides)
        cfg = transformers.AutoConfig.for_model(**d)
    with torch.device("meta"):
        m = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return m


def test_describe_reads_the_live_module():
    m = meta_model()
    d = guard.describe(m)
    assert d["params_by_dtype"] == {"bfloat16": sum(p.numel() for p in m.parameters())}
    assert d["trainable_by_dtype"]["bfloat16"] > 8e9
    assert d["gradient_checkpointing"] is False
    if hasattr(m, "activation_checkpointing_enable"):  # transformers 5
        m.activation_checkpointing_enable()
    else:
        m.gradient_checkpointing_enable()
    assert guard.describe(m)["gradient_checkpointing"] is True


def test_param_count_of_the_live_module_matches_vramfits_count_of_its_config():
    m = meta_model()
    live = sum(p.numel() for p in m.parameters())
    est = vramfit.estimate(str(LLAMA))
    assert est["model"]["params_total"] == live


def test_preflight_full_training_equals_vramfits_estimate_of_the_same_config():
    m = meta_model(dtype=torch.bfloat16)
    opt = torch.optim.AdamW(m.parameters(), foreach=False)
    r = guard.preflight(m, opt, batch=2, seq=1024, gpu="h100-80gb", quiet=True)
    assert r.arguments["task"] == "train" and r.arguments["dtype"] == "bf16"
    assert r.arguments["optimizer"] == "adamw" and r.arguments["no_foreach"] is True
    same = vramfit.estimate(str(LLAMA), task="train", dtype="bf16", batch=2, context=1024, optimizer="adamw",
                            no_foreach=True, checkpointing="none", gpu="h100-80gb")
    assert r.required_bytes == same["per_gpu"]["total_bytes"]
    assert r.fits == same["fit"]["fits"]
    assert r.estimate["per_gpu"] == same["per_gpu"]


def test_preflight_does_not_fit_names_the_largest_micro_batch_and_can_raise():
    m = meta_model(dtype=torch.bfloat16)
    (getattr(m, "activation_checkpointing_enable", None) or m.gradient_checkpointing_enable)()
    opt = torch.optim.AdamW(m.parameters())
    r = guard.preflight(m, opt, batch=64, seq=4096, gpu="h100-80gb", zero=3, gpus=8, quiet=True)
    assert r.fits is False
    assert r.largest_micro_batch is not None and r.largest_micro_batch < 64
    assert "does not fit" in str(r) and "largest micro-batch" in str(r)
    # the largest micro-batch is one that fits, and one more is one that does not
    if r.largest_micro_batch:
        ok = guard.preflight(m, opt, batch=r.largest_micro_batch, seq=4096, gpu="h100-80gb", zero=3, gpus=8, quiet=True)
        assert ok.fits is True
    with pytest.raises(guard.OutOfMemoryPredicted):
        guard.preflight(m, opt, batch=64, seq=4096, gpu="h100-80gb", zero=3, gpus=8, quiet=True, raise_on_fail=True)


def test_preflight_inference_module():
    m = meta_model(dtype=torch.float16)
    for p in m.parameters():
        p.requires_grad_(False)
    r = guard.preflight(m, batch=1, seq=2048, gpu="rtx-4090", quiet=True)
    assert r.arguments["task"] == "infer" and r.arguments["dtype"] == "fp16"
    same = vramfit.estimate(str(LLAMA), dtype="fp16", batch=1, context=2048, gpu="rtx-4090")
    assert r.required_bytes == same["per_gpu"]["total_bytes"]


def test_preflight_peft_lora_reads_rank_targets_and_matches_the_estimate():
    peft = pytest.importorskip("peft")
    m = meta_model(dtype=torch.bfloat16)
    cfg = peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    pm = peft.get_peft_model(m, cfg)
    opt = torch.optim.AdamW([p for p in pm.parameters() if p.requires_grad])
    r = guard.preflight(pm, opt, batch=4, seq=2048, gpu="rtx-4090", quiet=True)
    d = r.described
    assert d["peft"]["rank"] == 8 and sorted(d["peft"]["target_modules"]) == ["q_proj", "v_proj"]
    assert r.arguments["task"] == "lora" and r.arguments["dtype"] == "bf16"
    # PEFT's adapters are fp32 by default (autocast_adapter_dtype=True)
    assert r.arguments["adapter_dtype"] == ("fp32" if "float32" in d["adapter_params_by_dtype"] else "bf16")
    # vramfit's own count of the adapter equals the live one
    live_adapter = sum(p.numel() for n, p in pm.named_parameters() if "lora_" in n)
    assert r.estimate["model"]["params_trainable"] == live_adapter
    same = vramfit.estimate(str(LLAMA), task="lora", dtype="bf16", lora_rank=8, lora_targets="q_proj,v_proj",
                            lora_dropout=0.0, batch=4, context=2048, checkpointing="none",
                            adapter_dtype=r.arguments["adapter_dtype"], gpu="rtx-4090")
    assert r.required_bytes == same["per_gpu"]["total_bytes"]


class Params4bit(torch.nn.Parameter):
    """The shape of bitsandbytes' Params4bit: packed uint8 data and a quant_state."""


class QuantState:
    def __init__(self, quant_type="nf4", nested=True):
        self.quant_type = quant_type
        self.nested = nested


class Linear4bit(torch.nn.Module):
    """A bitsandbytes-shaped 4-bit linear (bitsandbytes needs CUDA to quantize): the class
    name, the packed weight and its quant_state are what vramfit.torch reads."""

    def __init__(self, lin: torch.nn.Linear, quant_type="nf4", nested=True):
        super().__init__()
        self.in_features, self.out_features = lin.in_features, lin.out_features
        w = torch.empty((lin.in_features * lin.out_features + 1) // 2, 1, dtype=torch.uint8, device="meta")
        self.weight = Params4bit(w, requires_grad=False)
        self.weight.quant_state = QuantState(quant_type, nested)
        self.bias = None


def test_preflight_bitsandbytes_shaped_qlora():
    peft = pytest.importorskip("peft")
    m = meta_model(dtype=torch.bfloat16)
    for layer in m.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, Linear4bit(child, nested=False))
    d = guard.describe(m)
    assert d["bnb_4bit_layers"] == 7 * 32 and d["bnb_4bit_quant_types"] == ["nf4"]
    # a LoRA on top (the adapter is read from the peft config; the base is the 4-bit one)
    cfg = peft.LoraConfig(r=16, target_modules=["lm_head"], lora_dropout=0.05)
    pm = peft.get_peft_model(m, cfg)
    args, notes = guard.estimate_args(guard.describe(pm), batch=1, seq=2048)
    assert args["task"] == "qlora" and args["no_double_quant"] is True and args["bnb_4bit_type"] == "nf4"
    # bf16 norms and embeddings: prepare_model_for_kbit_training was not applied
    assert args["no_kbit_prep"] is True


def test_preflight_without_a_card_on_cpu_gives_the_estimate_only():
    m = meta_model(dtype=torch.bfloat16)
    buf = io.StringIO()
    r = guard.preflight(m, torch.optim.SGD(m.parameters(), lr=0.1), batch=1, seq=512, stream=buf)
    assert r.fits is None and r.arguments["optimizer"] == "sgd"
    assert "no card" in buf.getvalue() and "no CUDA device" in buf.getvalue()


def test_preflight_refuses_a_module_without_a_config():
    with pytest.raises(ValueError, match="config"):
        guard.preflight(torch.nn.Linear(4, 4), quiet=True)


@pytest.mark.parametrize("fixture", ["snapshot_shared.pickle", "snapshot_shared_p2.pickle", "legacy_history.pickle"])
def test_oom_handler_on_recorded_snapshots(tmp_path, fixture):
    buf = io.StringIO()
    h = guard.OomHandler(tmp_path / "oom", max_entries=1000, rank=0, stream=buf)
    doc = h.handle(snapshot=SNAPSHOTS / fixture)
    assert doc["kind"] == "snapshot"
    out = buf.getvalue()
    assert "rank 0 ran out of memory" in out and "read as snapshot" in out
    files = sorted(p.name for p in (tmp_path / "oom").iterdir())
    assert files == ["rank0.diagnosis.json", "rank0.pickle", "rank0.txt", "ranks.json", "ranks.txt"]
    cli = vramfit._call.text("diagnose", {"file": str(SNAPSHOTS / fixture)})
    assert (tmp_path / "oom" / "rank0.txt").read_text().splitlines()[1:] == cli.splitlines()[1:]


def test_oom_handler_merges_ranks(tmp_path):
    out = tmp_path / "oom"
    for rank in (0, 1):
        guard.OomHandler(out, 1000, rank, io.StringIO()).handle(snapshot=SNAPSHOTS / "snapshot_shared.pickle")
    m = json.loads((out / "ranks.json").read_text())
    assert [r["rank"] for r in m["ranks"]] == [0, 1]
    assert m["imbalanced"] is False  # the same snapshot twice
    assert "balanced" in (out / "ranks.txt").read_text()


def test_on_oom_without_cuda_installs_nothing():
    buf = io.StringIO()
    h = guard.on_oom("unused", stream=buf)
    assert h.installed is False and "no CUDA device" in buf.getvalue()


def test_transformers_callback_runs_the_preflight(tmp_path):
    from vramfit.integrations.transformers import VramfitCallback, trainer_flags

    m = meta_model(dtype=torch.bfloat16)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2,
                                          gradient_accumulation_steps=4, bf16=False, use_cpu=True, report_to=[])
    assert trainer_flags(args) == {"grad_accum": 4}
    cb = VramfitCallback(seq=1024, out_dir=None, raise_on_fail=False, gpu="h100-80gb")
    cb.on_train_begin(args, None, None, model=m, optimizer=torch.optim.AdamW(m.parameters()))
    assert cb.result is not None and cb.result.arguments["batch"] == 2 and cb.result.arguments["grad_accum"] == 4
    cb = VramfitCallback(seq=8192, out_dir=None, gpu="rtx-4090")
    with pytest.raises(guard.OutOfMemoryPredicted):
        cb.on_train_begin(args, None, None, model=m, optimizer=torch.optim.AdamW(m.parameters()))


def test_lightning_callback_runs_the_preflight():
    lightning = pytest.importorskip("lightning")
    from vramfit.integrations.lightning import VramfitCallback, trainer_flags

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = meta_model(dtype=torch.bfloat16, num_hidden_layers=4)

    class FakeTrainer:
        precision = "bf16-true"
        accumulate_grad_batches = 1
        world_size = 1
        strategy = None
        optimizers = []
        train_dataloader = None

    t = FakeTrainer()
    assert trainer_flags(t) == {"dtype": "bf16"}
    cb = VramfitCallback(batch=1, seq=512, out_dir=None, raise_on_fail=False, gpu="h100-80gb")
    cb.on_train_start(t, Module())
    assert cb.result.fits is True and cb.result.arguments["task"] == "train"
