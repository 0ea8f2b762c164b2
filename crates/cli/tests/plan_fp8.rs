//! Issue 21, FP8 training (`--precision mixed-fp8`): through the binary, what
//! it adds per GPU under Megatron-LM, the engines and cards that run it, and
//! that the launchers write it.

mod common;
use common::{json, run, vramfit};

/// Megatron-LM `--fp8-format hybrid` on Llama-3.1-8B, one GPU: everything as
/// mixed-bf16 plus TransformerEngine's cached FP8 weight and its transpose,
/// 2 B per decoder-linear parameter: 32 layers × (q, o 2 × 4096 × 4096 + k, v
/// 2 × 4096 × 1024 + gate, up, down 3 × 4096 × 14336) = 32 × 218,103,808 =
/// 6,979,321,856 parameters → 13,958,643,712 B more weights.
#[test]
fn fp8_training_adds_the_fp8_weight_copies() {
    let job = |p: &str| {
        json(
            &[
                "estimate",
                "llama-3.1-8b",
                "--task",
                "train",
                "--engine",
                "megatron",
                "--precision",
                p,
                "--batch",
                "1",
                "--json",
            ],
            0,
        )
    };
    let (bf16, fp8) = (job("mixed-bf16"), job("mixed-fp8"));
    let cat = |v: &serde_json::Value, k: &str| v["per_gpu"]["categories"][k].as_u64().unwrap_or(0);
    assert_eq!(cat(&fp8, "weights") - cat(&bf16, "weights"), 13_958_643_712);
    for k in ["master_weights", "gradients", "optimizer_states", "activations"] {
        assert_eq!(cat(&fp8, k), cat(&bf16, k), "{k}");
    }
    let (text, _) = run(
        &[
            "estimate",
            "llama-3.1-8b",
            "--task",
            "train",
            "--engine",
            "megatron",
            "--precision",
            "mixed-fp8",
            "--wide",
            "--explain",
        ],
        0,
    );
    assert!(text.contains("FP8 copies of the decoder linears' weights and their transposes"), "{text}");
}

/// FP8 training where it runs: Megatron-LM and torchtitan, full training; the
/// Hugging Face engines and LoRA are refused naming --precision; a card
/// without FP8 tensor cores (A100) is named in the plan and left out.
#[test]
fn fp8_training_is_refused_where_it_does_not_run() {
    let (_, err) = run(&["estimate", "llama-3.1-8b", "--task", "train", "--precision", "mixed-fp8"], 2);
    assert!(err.contains("--precision with --engine transformers: FP8 training is modelled as Megatron-LM"), "{err}");
    let (_, err) =
        run(&["estimate", "llama-3.1-8b", "--task", "lora", "--engine", "torchtitan", "--precision", "mixed-fp8"], 2);
    assert!(err.contains("FP8 training is modelled for full training"), "{err}");
    let v = json(
        &[
            "plan",
            "llama-3.1-8b",
            "--task",
            "train",
            "--engine",
            "megatron",
            "--precision",
            "mixed-fp8",
            "--have",
            "a100-80gb",
            "--tokens",
            "100M",
            "--json",
        ],
        0,
    );
    let notes = v["notes"].to_string();
    assert!(notes.contains("has no FP8 tensor cores"), "{notes}");
    let gpu = v["recommended"]["gpu_id"].as_str().unwrap();
    assert!(!gpu.starts_with("a100") && !gpu.starts_with("v100"), "{gpu}");
}

/// `estimate --gpu` on a card without FP8 tensor cores refuses FP8 training as
/// the planner leaves such cards out (TransformerEngine `check_fp8_support`:
/// compute capability 8.9 or higher); a card with FP8 and a card given only by
/// its memory (`--gpu-mem`: capabilities unknown) are sized as before.
#[test]
fn fp8_training_is_refused_on_a_card_without_fp8() {
    let job = ["estimate", "llama-3.1-8b", "--task", "train", "--engine", "megatron", "--precision", "mixed-fp8"];
    let with = |extra: &[&'static str]| job.iter().copied().chain(extra.iter().copied()).collect::<Vec<_>>();
    for card in ["a100-80gb", "v100-32gb"] {
        let (out, err) = run(&with(&["--gpu", card]), 2);
        assert!(out.is_empty(), "{out}");
        assert!(err.contains("FP8 training (mixed-fp8) needs FP8 tensor cores"), "{card}: {err}");
        assert!(err.contains("--precision on "), "{err}");
    }
    let h100 = json(&with(&["--gpu", "h100", "--json"]), 1);
    assert!(h100["fit"]["fits"].is_boolean(), "{h100}");
    run(&with(&["--gpu-mem", "80GiB"]), 1);
    // bf16 on the A100 is what the refusal suggests, and it runs
    run(&["estimate", "llama-3.1-8b", "--task", "train", "--engine", "megatron", "--gpu", "a100-80gb"], 1);
}

/// The recommended FP8 plan is what `--emit` writes: Megatron `--bf16
/// --fp8-format hybrid`, torchtitan's `Float8LinearConverter` with the output
/// head left in bf16; a Hugging Face launcher refuses it by name.
#[test]
fn fp8_plans_are_emitted_by_the_launchers_that_run_them() {
    let job = |engine: &'static str| {
        vec!["llama-3.1-8b", "--task", "train", "--engine", engine, "--precision", "mixed-fp8", "--tokens", "100M"]
    };
    let emit = |engine: &'static str, l: &str| {
        let o = vramfit().args([&["plan"][..], &job(engine), &["--emit", l]].concat()).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (code, out, err) = emit("megatron", "megatron");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("--bf16") && out.contains("--fp8-format hybrid"), "{out}");
    let (code, out, err) = emit("torchtitan", "torchtitan");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("converters=[Float8LinearConverter.Config(filter_fqns=[\"output\"])]"), "{out}");
    let v = json(&[&["plan"][..], &job("torchtitan"), &["--launcher", "torchtitan", "--json"]].concat(), 0);
    assert_eq!(v["recommended"]["setup"]["precision"], "mixed-fp8", "{}", v["recommended"]);
    // a Hugging Face launcher runs no plan (exit 1): the best is named with why it cannot run it
    let v = json(&[&["plan"][..], &job("torchtitan"), &["--launcher", "deepspeed", "--json"]].concat(), 1);
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("the plan trains in FP8 (mixed-fp8): deepspeed has no FP8 training written here"),
        "{notes}"
    );
}
