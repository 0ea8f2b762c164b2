"""The Python API against the installed wheel: every function, its errors, the JSON
schema round trip, the generated signatures, `python -m vramfit` against the CLI.

Run from the repository root (fixtures are read from crates/*/tests/fixtures):
    python -m pytest python/tests/test_api.py
VRAMFIT_CLI=path/to/vramfit compares `python -m vramfit` with that binary.
"""

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vramfit
from vramfit import _native

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "crates/diagnose/tests/fixtures/snapshot/snapshot_shared.pickle"
OOM_LOG = ROOT / "crates/diagnose/tests/fixtures/oom/composed_multi_rank_log.txt"
SMI_XML = ROOT / "crates/hw/tests/fixtures/nvidia_smi/07.xml"
CONFIG = ROOT / "crates/ingest/tests/fixtures/configs/05_qwen2.5-7b-instruct.json"

# never the network, never the developer's HF cache (as the Rust tests)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HOME"] = "/nonexistent-vramfit-test"


def test_the_issue_example_fits_on_a_4090():
    r = vramfit.estimate("llama-3.1-8b", gpu="rtx-4090")
    assert r["fit"]["fits"] is True
    assert r["fits"] is True and r["exit_code"] == 0
    assert r["command"] == "estimate" and r["schema"] == 1


def test_estimate_does_not_fit_is_exit_1_not_an_error():
    r = vramfit.estimate("llama-2-70b", gpu="rtx-4090")
    assert r["fit"]["fits"] is False and r["fits"] is False and r["exit_code"] == 1


def test_estimate_without_a_card_has_no_fit():
    r = vramfit.estimate("llama-2-7b", batch=4, context=1024)
    assert "fit" not in r and r["fits"] is None
    assert r["per_gpu"]["total_bytes"] > 13 * 2**30  # 6.7 B parameters in bf16 alone


def test_keywords_are_the_cli_flags_and_give_the_cli_json():
    kwargs = dict(task="qlora", lora_rank=16, lora_targets="all-linear", checkpointing="full", gpu="rtx-3090")
    r = vramfit.estimate("llama-2-13b", **kwargs)
    cli = subprocess.run(
        [sys.executable, "-m", "vramfit", "estimate", "llama-2-13b", "--task", "qlora", "--lora-rank", "16",
         "--lora-targets", "all-linear", "--checkpointing", "full", "--gpu", "rtx-3090", "--json"],
        capture_output=True, text=True, check=False,
    )
    doc = json.loads(cli.stdout)
    assert cli.returncode == r["exit_code"]
    r.pop("exit_code")
    r.pop("fits")
    assert r == doc  # the same document, key for key


def test_alias_seq_is_context_and_lists_go_to_multi_value_flags():
    a = vramfit.estimate("llama-2-7b", task="train", seq=1024)
    b = vramfit.estimate("llama-2-7b", task="train", context=1024)
    assert a["per_gpu"] == b["per_gpu"] and a["workload"]["seq"] == 1024
    p = vramfit.plan("llama-2-7b", task="train", have="rtx-3090", allow=["lora", "qlora"])
    q = vramfit.plan("llama-2-7b", task="train", have="rtx-3090", allow="lora,qlora")
    assert p["recommended"] == q["recommended"]


def test_vllm_names_and_128k_are_the_flags_themselves():
    a = vramfit.estimate("llama-3.1-8b", max_model_len="128k", tensor_parallel_size=2, kv_cache_dtype="fp8")
    b = vramfit.estimate("llama-3.1-8b", context=131072, tp=2, kv_dtype="fp8")
    assert a == b and a["workload"]["seq"] == 131072


def test_a_config_json_path_and_pathlike():
    r = vramfit.estimate(CONFIG, gpu="a100-80gb")
    assert r["model"]["params_total"] > 7e9 and r["fits"] is True


def test_plan():
    p = vramfit.plan("llama-2-7b", task="train", have="rtx-3090", allow=["lora", "qlora"])
    assert p["command"] == "plan" and p["exit_code"] in (0, 1)
    assert p["fits"] == (p["exit_code"] == 0)
    assert p["ranked"], "a ranked table"


def test_diagnose_a_snapshot_fixture():
    d = vramfit.diagnose(str(SNAPSHOT))
    assert isinstance(d, dict)
    assert d["kind"] == "snapshot" and d["exit_code"] == 0
    dev = d["diagnosis"]["report"]["devices"][0]
    assert dev["ooms"][0]["class"] == "genuine-shortage"
    assert dev["peak"]["allocated_bytes"] == 18 * 2**20


def test_diagnose_an_oom_log():
    d = vramfit.diagnose(OOM_LOG)
    assert d["kind"] == "oom"


def test_mig_plan():
    m = vramfit.mig_plan(gpu="a100-80gb", service=["chat=llama-3.1-8b", "embed=8GiB"])
    assert m["fits"] is True and m["exit_code"] == 0 and len(m["services"]) == 2


def test_check():
    c = vramfit.check(xml=SMI_XML, expect="8xA100-80GB")
    assert c["command"] == "check"
    assert c["ok"] == (c["exit_code"] == 0)


def test_unknown_model_is_an_input_error_about_the_model():
    with pytest.raises(vramfit.InputError) as e:
        vramfit.estimate("no-such-model")
    assert isinstance(e.value, ValueError)
    assert "no-such-model" in e.value.message
    assert e.value.field == "model"
    assert e.value.exit_code == 2


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(batch="many"), "batch"),  # clap: not a number
        (dict(task="dance"), "task"),  # clap: not a possible value
        (dict(batch=-1), "batch"),  # the API: not a non-negative integer
        (dict(gpu=["a", "b"]), "gpu"),  # one value only
    ],
)
def test_bad_values_name_their_field(kwargs, field):
    with pytest.raises(vramfit.InputError) as e:
        vramfit.estimate("llama-2-7b", **kwargs)
    assert e.value.field == field, e.value.message


def test_plan_zero_out_of_range_names_zero():
    with pytest.raises(vramfit.InputError) as e:
        vramfit.plan("llama-2-7b", task="train", zero=7)
    assert e.value.field == "zero"


def test_validation_errors_are_input_errors():
    # a workload rule: the WorkloadError in the error chain names its field
    with pytest.raises(vramfit.InputError) as e:
        vramfit.estimate("llama-2-7b", batch=0)
    assert "--batch" in e.value.message
    assert e.value.field == "batch"


def test_unknown_keyword_is_a_type_error_like_any_python_function():
    with pytest.raises(TypeError):
        vramfit.estimate("llama-2-7b", no_such_flag=1)


def test_unrepresentable_value_is_an_input_error():
    with pytest.raises(vramfit.InputError) as e:
        vramfit.estimate("llama-2-7b", gpu=object())
    assert e.value.field == "gpu"


def test_internal_error_type():
    assert issubclass(vramfit.InternalError, RuntimeError)
    assert issubclass(vramfit.InputError, vramfit.VramfitError)
    assert not issubclass(vramfit.InternalError, ValueError)


def test_schema_round_trip_through_json():
    for doc in (
        vramfit.estimate("mistral-7b", batch=8, context=4096, gpu="a100-80gb", sweep=True),
        vramfit.plan("llama-2-7b", task="train", have="rtx-3090"),
        vramfit.diagnose(SNAPSHOT),
    ):
        again = json.loads(json.dumps(doc))
        assert again == doc
        assert doc["schema"] == 1
        # integer bytes in JSON (docs/schema.md): every *_bytes is an int
        stack = [doc]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                for k, v in x.items():
                    if k.endswith("_bytes") and v is not None:
                        ints = v if isinstance(v, list) else [v]
                        assert all(isinstance(i, int) and not isinstance(i, bool) for i in ints), (k, v)
                    stack.append(v)
            elif isinstance(x, list):
                stack.extend(x)


def test_signatures_list_every_cli_flag():
    for tool in _native.tools():
        spec = json.loads(_native.params(tool))
        fn = getattr(vramfit, tool)
        sig = inspect.signature(fn)
        for p in spec["params"]:
            assert p["name"] in sig.parameters, (tool, p["name"])
            for a in p["aliases"]:
                assert a in sig.parameters
        doc = fn.__doc__
        for p in spec["params"]:
            if p["flag"]:
                assert p["flag"] in doc, (tool, p["flag"])
        assert "Example" in doc and "InputError" in doc


def test_help_lists_the_flags():
    import pydoc

    text = pydoc.render_doc(vramfit.estimate, renderer=pydoc.plaintext)
    for flag in ("--gpu", "--lora-rank", "--batch", "--task"):
        assert flag in text


def test_generated_files_match_the_cli():
    r = subprocess.run([sys.executable, "-m", "vramfit._stubgen", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_typed_package_ships_stubs():
    pkg = Path(vramfit.__file__).parent
    assert (pkg / "py.typed").exists() and (pkg / "__init__.pyi").exists()


def test_merge_ranks_flags_imbalance():
    base = vramfit.diagnose(SNAPSHOT)
    peak = base["diagnosis"]["report"]["devices"][0]["peak"]["allocated_bytes"]

    def scaled(f):
        d = json.loads(json.dumps(base))
        d["diagnosis"]["report"]["devices"][0]["peak"]["allocated_bytes"] = int(peak * f)
        return json.dumps(d)

    m = json.loads(_native.merge_ranks([(1, scaled(1.0)), (0, scaled(0.7))]))
    assert m["imbalanced"] is True and [r["rank"] for r in m["ranks"]] == [0, 1]
    assert m["peak_allocated"]["max_rank"] == 1 and "imbalanced" in m["findings"][0]
    m = json.loads(_native.merge_ranks([(0, scaled(1.0)), (1, scaled(0.95))]))
    assert m["imbalanced"] is False and "balanced" in m["findings"][0]
    # exactly 10 % apart is not more than 10 %
    d100 = json.loads(scaled(1.0))
    d100["diagnosis"]["report"]["devices"][0]["peak"]["allocated_bytes"] = 100 << 20
    d90 = json.loads(json.dumps(d100))
    d90["diagnosis"]["report"]["devices"][0]["peak"]["allocated_bytes"] = 90 << 20
    m = json.loads(_native.merge_ranks([(0, json.dumps(d100)), (1, json.dumps(d90))]))
    assert m["imbalanced"] is False
    d89 = json.loads(json.dumps(d100))
    d89["diagnosis"]["report"]["devices"][0]["peak"]["allocated_bytes"] = 89 << 20
    m = json.loads(_native.merge_ranks([(0, json.dumps(d100)), (1, json.dumps(d89))]))
    assert m["imbalanced"] is True
    # a single rank is never imbalanced; a non-snapshot diagnosis is refused
    assert json.loads(_native.merge_ranks([(0, scaled(1.0))]))["imbalanced"] is False
    with pytest.raises(ValueError, match="not a memory snapshot"):
        _native.merge_ranks([(0, json.dumps(vramfit.diagnose(OOM_LOG)))])


def test_import_does_not_import_torch():
    code = "import sys, vramfit, vramfit.torch; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- python -m vramfit is the CLI --------------------------------------------------------

CASES = [
    (["estimate", "llama-2-7b", "--gpu", "a100-80gb"], 0),
    (["estimate", "llama-2-70b", "--gpu", "rtx-4090"], 1),
    (["estimate", "no-such-model"], 2),
    (["estimate", "llama-2-7b", "--batch", "x"], 2),
    (["estimate", "llama-2-7b", "-ngl", "3"], 2),  # llama.cpp short flag pre-processing, as main.rs
    (["diagnose", str(SNAPSHOT)], 0),
    (["--version"], 0),
    (["estimate", "--help"], 0),
    ([], 2),
]


def _run(prefix, args):
    env = dict(os.environ, NO_COLOR="1")
    return subprocess.run(prefix + args, capture_output=True, text=True, env=env, cwd=ROOT)


@pytest.mark.parametrize("args,code", CASES)
def test_python_dash_m_exit_codes(args, code):
    r = _run([sys.executable, "-m", "vramfit"], args)
    assert r.returncode == code, r.stderr
    if code == 2 and args and args[0] == "estimate" and "-ngl" not in args:
        assert r.stderr.startswith("vramfit: error:") or r.stderr.startswith("error:"), r.stderr
        assert r.stdout == ""


@pytest.mark.parametrize("args,code", CASES)
def test_python_dash_m_is_byte_identical_to_the_cli(args, code):
    cli = os.environ.get("VRAMFIT_CLI") or str(ROOT / "target/debug/vramfit")
    if not Path(cli).exists():
        pytest.skip(f"no CLI binary at {cli} (set VRAMFIT_CLI)")
    a = _run([sys.executable, "-m", "vramfit"], args)
    b = _run([cli], args)
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "vramfit"
    assert script.exists()
    r = _run([str(script)], ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--json"])
    assert r.returncode == 0 and json.loads(r.stdout)["fit"]["fits"] is True


def test_closed_stdout_is_not_an_error():
    # `vramfit … | head -c1`: the CLI's exit code stays the outcome's (docs/exit-codes.md)
    p = subprocess.Popen([sys.executable, "-m", "vramfit", "estimate", "llama-2-7b", "--explain"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.read(1)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait() == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
