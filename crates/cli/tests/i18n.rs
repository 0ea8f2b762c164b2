//! Chinese text output (`--lang zh`, `LANG=zh_CN.UTF-8`; issue 24 item 8):
//! every sentence of a corpus of reports has a Chinese version in the
//! catalogue (crates/report/src/i18n/zh.txt), the verdict reads in
//! Chinese, and `--json` is the same in every language.

mod common;
use common::{run, vramfit};
use vramfit_report::i18n::{localize_json, localize_text, translate, Lang};

/// Reports whose every sentence must have Chinese: `estimate` across
/// tasks, fits and misses, capacity and the sweep (the README tour's
/// estimate lines among them), a training plan, a diagnosis, a check
/// and MIG plans, `--explain` (inference, training, QLoRA, GGUF, ZeRO-3
/// and FSDP with offload, MoE), the preset and GPU lists, `calibrate`
/// (all three sets), `mig profiles`, `mig plan
/// --explain`, `check` on fleets, topologies, bandwidth reports and
/// MIG-enabled machines, `diagnose` on a memory_summary, snapshots and
/// OOM logs (PyTorch 1.4–2.2, HIP, MPS, XLA, vLLM, llama.cpp, DeepSpeed;
/// one beside an estimate).
/// Add a case here when a renderer gains a sentence.
const CORPUS: &[(&[&str], i32)] = &[
    (&["estimate", "llama-3.1-8b", "--gpu", "rtx-4090"], 0),
    (&["estimate", "llama-2-7b", "--batch", "32", "--context", "4096"], 0),
    (&["estimate", "mistral-7b", "--batch", "32", "--context", "4096"], 0),
    (&["estimate", "meta-llama/Llama-3.1-8B", "--gpu", "a100-80gb", "--gpu-util", "0.9", "--context", "8192"], 0),
    (&["estimate", "mixtral-8x7b", "--tp", "2", "--kv-dtype", "fp8"], 0),
    (&["estimate", "llama-2-13b", "--gpu", "rtx-4090"], 1),
    (&["estimate", "llama-2-13b", "--gpu", "rtx-4090", "--sweep"], 1),
    (&["estimate", "llama-3.1-8b", "--gpu", "h100", "--sweep"], 0),
    (
        &[
            "estimate",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--optimizer",
            "adamw",
            "--batch",
            "4",
            "--seq",
            "2048",
        ],
        0,
    ),
    (
        &[
            "estimate",
            "llama-2-13b",
            "--task",
            "qlora",
            "--lora-rank",
            "16",
            "--lora-targets",
            "all-linear",
            "--checkpointing",
            "full",
            "--gpu",
            "rtx-3090",
        ],
        0,
    ),
    (&["estimate", "llama-2-13b", "--task", "lora", "--gpu", "rtx-4090", "--sweep"], 1),
    (&["estimate", "llama-2-7b", "--task", "train", "--gpu", "a100-80gb", "--sweep"], 1),
    (&["estimate", "llama-2-7b", "--gpu-mem", "24GiB", "--gpu-util", "0.9"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/composed_multi_rank_log.txt"], 0),
    (&["check", "--xml", "../hw/tests/fixtures/nvidia_smi/01.xml", "--expect", "1xA100-40GB"], 1),
    // service names are the user's (kept as given): names that are not English words here
    (
        &[
            "mig",
            "plan",
            "--gpu",
            "a100-40gb",
            "--service",
            "chat-1=12GiB",
            "--service",
            "embed-2=4GiB",
            "--service",
            "rag-3=llama-3.2-3b:ctx=8192,conc=4",
        ],
        0,
    ),
    (&["mig", "plan", "--gpu", "a100-40gb", "--service", "chat-1=12GiB"], 0),
    (&["plan", "llama-2-7b", "--task", "train", "--have", "rtx-3090", "--allow", "lora,qlora"], 0),
    // inference plans, a serving engine's cap, clusters, a deadline, a launcher, expert parallelism
    (&["plan", "llama-2-13b", "--dtype", "fp16", "--have", "rtx-3090"], 0),
    (&["plan", "llama-3.1-70b", "--concurrency", "32", "--context", "8192", "--engine", "vllm"], 0),
    (&["plan", "llama-3.1-405b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B"], 0),
    (&["plan", "llama-3.1-405b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B", "--hours", "24"], 0),
    (&["plan", "llama-3.1-405b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B", "--hours", "8"], 1),
    (&["plan", "llama-2-7b", "--task", "train", "--launcher", "deepspeed"], 0),
    (&["plan", "llama-2-7b", "--task", "train", "--gpus", "1", "--allow", "lora,qlora"], 0),
    (&["plan", "llama-3.1-8b", "--context", "131072", "--output-len", "512"], 0),
    (&["estimate", "gpt-oss-120b", "--task", "train", "--dtype", "bf16"], 0),
    (&["estimate", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--ep", "8", "--dtype", "fp8", "--gpu", "h200"], 0),
    // Megatron-LM: its model states, the distributed optimizer, MoE training with EP, its launcher
    (&["estimate", "llama-2-7b", "--task", "train", "--engine", "megatron", "--gpus", "8", "--explain"], 0),
    (
        &[
            "estimate",
            "mixtral-8x7b",
            "--task",
            "train",
            "--engine",
            "megatron",
            "--gpus",
            "16",
            "--tp",
            "2",
            "--sp",
            "--ep",
            "8",
            "--zero",
            "1",
            "--explain",
        ],
        0,
    ),
    (&["plan", "mixtral-8x7b", "--task", "train", "--launcher", "megatron", "--tokens", "1B"], 0),
    // DeepSpeed AutoEP: its memory split and its layouts in the plan
    (
        &[
            "estimate",
            "mixtral-8x7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--engine",
            "deepspeed",
            "--gpus",
            "16",
            "--ep",
            "8",
            "--zero",
            "2",
            "--seq",
            "8192",
            "--explain",
        ],
        0,
    ),
    (
        &[
            "plan",
            "qwen3-30b-a3b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--tokens",
            "100B",
            "--launcher",
            "deepspeed",
        ],
        0,
    ),
    // expert-parallel layouts in the plan (issue 21 item 4), data-parallel attention in the estimate
    (&["plan", "deepseek-v3", "--dtype", "fp8", "--concurrency", "64", "--context", "8192"], 0),
    (&["plan", "deepseek-v3", "--dtype", "fp8", "--concurrency", "64", "--context", "8192", "--engine", "vllm"], 0),
    (
        &[
            "estimate",
            "deepseek-v3",
            "--engine",
            "sglang",
            "--tp",
            "8",
            "--ep",
            "8",
            "--dp-attention",
            "8",
            "--dtype",
            "fp8",
            "--concurrency",
            "64",
            "--gpu",
            "h200",
        ],
        0,
    ),
    // GGUF under llama.cpp: a MoE file on one card, a dense one split with the host, a recurrent one
    (&["estimate", "../../fuzz/seeds/ingest_gguf/moe_f16.gguf", "--gpu", "rtx-4090"], 0),
    (&["estimate", "../../fuzz/seeds/ingest_gguf/dense_f16.gguf", "--gpu", "rtx-4090", "-ngl", "1", "-np", "4"], 0),
    (&["estimate", "../../fuzz/seeds/ingest_gguf/mamba.gguf", "--gpu", "rtx-4090"], 0),
    // beside the model: a projector (--mmproj) and a draft model (-md)
    (
        &[
            "estimate",
            "../../fuzz/seeds/ingest_gguf/dense_f16.gguf",
            "--gpu",
            "rtx-4090",
            "--mmproj",
            "../../fuzz/seeds/ingest_gguf/mmproj_clip.gguf",
            "-md",
            "../../fuzz/seeds/ingest_gguf/dense_f16.gguf",
        ],
        0,
    ),
    // --explain: the prose around the formulas (formulas, their one-word terms and identifiers stay as written)
    (&["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--explain"], 0),
    (&["estimate", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--batch", "4", "--explain"], 0),
    (&["estimate", "llama-2-13b", "--task", "qlora", "--checkpointing", "full", "--gpu", "rtx-3090", "--explain"], 0),
    (&["estimate", "llama-2-7b", "--task", "lora", "--gpu", "rtx-4090", "--explain"], 1),
    (
        &[
            "estimate",
            "../../fuzz/seeds/ingest_gguf/dense_f16.gguf",
            "--gpu",
            "rtx-4090",
            "-ngl",
            "1",
            "-np",
            "4",
            "--explain",
        ],
        0,
    ),
    (&["estimate", "../../fuzz/seeds/ingest_gguf/moe_f16.gguf", "--gpu", "rtx-4090", "--explain"], 0),
    (
        &[
            "estimate",
            "llama-3.1-70b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--zero",
            "3",
            "--gpus",
            "8",
            "--gpu",
            "a100-80gb",
            "--explain",
        ],
        1,
    ),
    (
        &[
            "estimate",
            "llama-3.1-70b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--fsdp",
            "full-shard",
            "--gpus",
            "8",
            "--offload",
            "cpu",
            "--explain",
        ],
        0,
    ),
    (&["estimate", "mixtral-8x7b", "--tp", "2", "--kv-dtype", "fp8", "--explain"], 0),
    (
        &[
            "estimate",
            "deepseek-v3",
            "--engine",
            "vllm",
            "--tp",
            "8",
            "--ep",
            "8",
            "--dtype",
            "fp8",
            "--gpu",
            "h200",
            "--explain",
        ],
        0,
    ),
    (&["estimate", "--list-presets"], 0),
    (&["estimate", "--list-gpus"], 0),
    (&["estimate", "llama-2-7b", "--task", "qlora", "--gpu", "rtx-3090", "--sweep"], 0),
    // calibrate: the three sets
    (&["calibrate"], 0),
    (&["calibrate", "--set", "published"], 0),
    (&["calibrate", "--set", "published", "--group", "llamacpp"], 0),
    (&["calibrate", "--set", "published", "--group", "serving"], 0),
    (&["calibrate", "--group", "A"], 0),
    (&["calibrate", "--set", "throughput"], 0),
    // mig profiles (no --wide) and mig plan --explain
    (&["mig", "profiles", "--gpu", "a100-40gb"], 0),
    (&["mig", "profiles", "--gpu", "h100-80gb"], 0),
    (
        &[
            "mig",
            "profiles",
            "--gpu",
            "a100-40gb",
            "--lgip",
            "../hw/tests/fixtures/constructed/a100-40gb.lgip.txt",
            "--lgipp",
            "../hw/tests/fixtures/constructed/a100-40gb.lgipp.txt",
        ],
        0,
    ),
    (&["mig", "plan", "--gpu", "a100-40gb", "--service", "chat-1=12GiB", "--explain"], 0),
    (
        &[
            "mig",
            "plan",
            "--gpu",
            "a100-40gb",
            "--service",
            "chat-1=12GiB",
            "--service",
            "rag-3=llama-3.2-3b:ctx=8192,conc=4",
            "--explain",
        ],
        0,
    ),
    // check: fleets, topology, bandwidth reports, MIG-enabled machines, other captures
    // hybrid sharding (HSDP): the estimate's shard group, a plan recommending it
    (
        &[
            "estimate",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--gpus",
            "32",
            "--zero",
            "3",
            "--dp-replicate",
            "4",
            "--explain",
        ],
        0,
    ),
    (
        &[
            "plan",
            "gemma-2-27b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--batch",
            "4",
            "--grad-accum",
            "8",
            "--launcher",
            "accelerate",
            "--catalog",
            "tests/fixtures/plan/hsdp_ethernet_cluster.toml",
        ],
        0,
    ),
    // DeepSpeed ZeRO++ hpZ: the estimate's secondary partition, a plan recommending it
    (
        &[
            "estimate",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--gpus",
            "32",
            "--zero",
            "3",
            "--hpz",
            "8",
            "--explain",
        ],
        0,
    ),
    (
        &[
            "plan",
            "gemma-2-27b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--batch",
            "4",
            "--grad-accum",
            "8",
            "--launcher",
            "deepspeed",
            "--catalog",
            "tests/fixtures/plan/hsdp_ethernet_cluster.toml",
        ],
        0,
    ),
    (
        &["plan", "llama-2-7b", "--task", "train", "--gpus", "16", "--zero", "3", "--hpz", "8", "--emit", "accelerate"],
        2,
    ),
    (&["check", "--fleet", "../hw/tests/fixtures/fleet/autodl-4"], 1),
    (&["check", "--fleet", "../hw/tests/fixtures/fleet/autodl-4-ok"], 0),
    (&["check", "--fleet", "../hw/tests/fixtures/fleet/a3mega-2"], 0),
    (&["check", "--fleet", "../hw/tests/fixtures/fleet/ib-2", "--expect-fabric", "ib400"], 1),
    (&["check", "--fleet", "../hw/tests/fixtures/fleet/stelline-1"], 0),
    (&["check", "--xml", "../hw/tests/fixtures/nvidia_smi/02.xml"], 0),
    (&["check", "--xml", "../hw/tests/fixtures/derived/04-cuda-not-found.xml"], 0),
    (
        &[
            "check",
            "--text",
            "../hw/tests/fixtures/captures/h100-hbm3-590.q.txt",
            "--topo",
            "../hw/tests/fixtures/captures/h100-hbm3-590.topo.txt",
            "--expect",
            "8xH100-80GB",
            "--expect-nvlink",
        ],
        1,
    ),
    (&["check", "--text", "../hw/tests/fixtures/captures/h100-mig-590.q.txt"], 0),
    (
        &[
            "check",
            "--text",
            "../hw/tests/fixtures/constructed/a100-40gb-mig.q.txt",
            "--lgi",
            "../hw/tests/fixtures/constructed/a100-40gb.lgi.txt",
            "--lgip",
            "../hw/tests/fixtures/constructed/a100-40gb.lgip.txt",
        ],
        0,
    ),
    (&["check", "--text", "../hw/tests/fixtures/captures/l40s-595.q.txt"], 0),
    (
        &[
            "check",
            "--text",
            "../hw/tests/fixtures/captures/rtx2080s-610.q.txt",
            "--topo",
            "../hw/tests/fixtures/captures/rtx2080s-win-610.topo.txt",
        ],
        0,
    ),
    (&["check", "--list", "../hw/tests/fixtures/captures/h100-hbm3-590.L.txt"], 0),
    (
        &[
            "check",
            "--topo",
            "../hw/tests/fixtures/bandwidth/autodl-2080ti.topo.txt",
            "--bandwidth",
            "../hw/tests/fixtures/bandwidth/autodl-2080ti.bandwidthTest.txt",
            "--p2p",
            "../hw/tests/fixtures/bandwidth/autodl-2080ti.p2p.txt",
            "--nccl",
            "../hw/tests/fixtures/bandwidth/autodl-2080ti.all_reduce.txt",
        ],
        0,
    ),
    // diagnose: a memory_summary, memory snapshots
    (&["diagnose", "../diagnose/tests/fixtures/memory_summary/01.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/snapshot/snapshot_shared.pickle"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/snapshot/segments_only.pickle"], 0),
    // diagnose: OOM logs of PyTorch ≤1.4 and 1.5–2.0, llama.cpp, a DeepSpeed run, and one beside an estimate
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt110_hint_deepspeed3869.txt"], 0),
    // diagnose: the sentences the last OOM fixtures still printed in English (cudaMallocAsync, BFC summary, nvidia-smi table, cut messages, NVML PIDs)
    (&["diagnose", "../diagnose/tests/fixtures/oom/async_animatediff320_pool.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/bfc_reactant2632_summary.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/cuda_gpt2chitchat19_nvsmi.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt110_cogsd66_cache_near_request.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt15_reserved_opixray.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_club3090_58_title_cut.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_msswift5943_rank3_pools.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_vllm15039_lora_pid.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_vllm16343_title_cut.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_vllm27508_sampler_pid.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/ggml_llamacpp11476_compute.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt14_pytorch16417_free.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt110_llamafactory182_wrong_gpu.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/mps_comfyui7440.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/hip_therock1054_apu.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/bfc_jax27354_tib.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/bfc_reactant1214_remat.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/ds_easycontext11_cache_flushes.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt15_shiftgcn34_scraps.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt15_pytorch40863_other_holds_card.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt15_fairseq2442_granularity.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt21_capacty_lerf73.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_genesisvllm1_longctx.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_vllm20581_llama4.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_keye11_request_over_card.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt22_llamafactory7532_deepspeed_pid.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt110_ocrtablenet3_free_equals_request.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/pt14_csail151_large_request.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/val_kohya369_1050ti.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/async_comfyui4852_cut.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/cuda_tinycudann387.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/vllm_qanything302_budget.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/vllm_startup_23192_other.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/vllm_startup_50135_xpu_other.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/memory_summary/issue_pytorch37250_with_oom.txt"], 0),
    // TensorFlow (BFC allocator, StreamExecutor), PyTorch ≤ 0.4 (THC), XLA, llama.cpp on the host, the
    // CUDA driver under expandable segments, cudaMallocAsync, an APU's total, vLLM's max_model_len
    (&["diagnose", "../diagnose/tests/fixtures/oom/tf_azure880_two_roots.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/tf_keras9643_gpu1.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/tf_sleap2142_driver_oom.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/thc_ncrfpp121_backward.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/xla_jax13428_peakbuffers.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/ggml_ollama12634_cpu_buffer.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/cudadriver_unsloth2401_jetson.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/async_chattts9_pool.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/hip_therock4598_free_gt_total.txt"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/vllm_10517_maxlen_tokens.txt"], 0),
    (
        &[
            "diagnose",
            "../diagnose/tests/fixtures/oom/pt110_hint_deepspeed3869.txt",
            "--model",
            "llama-2-7b",
            "--task",
            "train",
            "--batch",
            "4",
            "--seq",
            "2048",
        ],
        0,
    ),
    // Megatron expert-tensor parallelism (issue 21 item 4)
    (
        &[
            "estimate",
            "mixtral-8x7b",
            "--task",
            "train",
            "--engine",
            "megatron",
            "--precision",
            "mixed-bf16",
            "--tp",
            "2",
            "--ep",
            "4",
            "--etp",
            "2",
            "--gpus",
            "16",
            "--sp",
            "--zero",
            "1",
            "--checkpointing",
            "full",
            "--explain",
        ],
        0,
    ),
];

#[test]
fn every_sentence_of_the_corpus_has_chinese() {
    let mut missing: Vec<String> = Vec::new();
    for (args, code) in CORPUS {
        let mut a = args.to_vec();
        // mig profiles has no --wide (its table is never wrapped)
        if !args.starts_with(&["mig", "profiles"]) {
            a.push("--wide");
        }
        let (en, _) = run(&a, *code);
        for m in localize_text(&en, Lang::Zh).missing {
            let line = format!("{m}\n      (from: vramfit {})", args.join(" "));
            if !missing.contains(&line) {
                missing.push(line);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} sentence(s) have no Chinese. Add each to crates/report/src/i18n/zh.txt as an `en:` line \
         (the English exactly as printed, each variable part a typed hole: {{b}} size, {{n}} number, \
         {{w}} one word, {{t}} verbatim text, {{s}} a nested sentence) and a `zh:` line placing the holes \
         as {{1}}, {{2}}, … (the file's head explains; `cargo test -p vramfit-report i18n` checks the entry):\n\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

/// JSON reports whose sentences the web page shows in Chinese (it asks
/// the API with `lang: "zh"`): plan reasons, notes, offer names and steps;
/// diagnose verdicts, causes, fixes and reasoning; check findings.
const JSON_CORPUS: &[(&[&str], i32)] = &[
    (&["plan", "llama-2-13b", "--task", "train", "--have", "rtx-3090"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/composed_multi_rank_log.txt"], 0),
    (&["check", "--xml", "../hw/tests/fixtures/nvidia_smi/01.xml", "--expect", "1xA100-40GB"], 1),
    (&["estimate", "mixtral-8x7b", "--tp", "2", "--kv-dtype", "fp8"], 0),
];

#[test]
fn every_sentence_the_page_shows_for_the_json_corpus_has_chinese() {
    let mut missing: Vec<String> = Vec::new();
    for (args, code) in JSON_CORPUS {
        let mut a = args.to_vec();
        a.push("--json");
        let (out, _) = run(&a, *code);
        let mut v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e})"));
        for m in localize_json(&mut v, Lang::Zh) {
            let line = format!("{m}\n      (from: vramfit {} --json)", args.join(" "));
            if !missing.contains(&line) {
                missing.push(line);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} sentence(s) of JSON reports have no Chinese (the web page shows them in English). Add each to \
         crates/report/src/i18n/zh.txt as an `en:`/`zh:` pair (the file's head explains the holes):\n\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn estimate_lang_zh_prints_its_verdict_in_chinese() {
    let (zh, _) = run(&["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--lang", "zh"], 0);
    assert!(zh.contains("RTX 4090：放得下——需要 16.46 GiB"), "{zh}");
    assert!(zh.contains("峰值阶段：prefill"), "{zh}");
    assert!(!zh.contains("FITS"), "{zh}");
    let (miss, _) = run(&["estimate", "llama-2-13b", "--gpu", "rtx-4090", "--lang", "zh"], 1);
    assert!(miss.contains("RTX 4090：放不下——需要"), "{miss}");
    assert!(miss.contains("（缺 "), "{miss}");
}

#[test]
fn lang_env_gives_chinese_and_the_flag_wins() {
    let args = ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090"];
    let flag = vramfit().args(args).args(["--lang", "zh"]).output().expect("runs");
    let env = vramfit().args(args).env("LANG", "zh_CN.UTF-8").output().expect("runs");
    assert_eq!(String::from_utf8_lossy(&env.stdout), String::from_utf8_lossy(&flag.stdout));
    assert!(String::from_utf8_lossy(&env.stdout).contains("放得下"));
    // LC_ALL outranks LANG, and --lang outranks both
    let c = vramfit().args(args).env("LANG", "zh_CN.UTF-8").env("LC_ALL", "C").output().expect("runs");
    assert!(String::from_utf8_lossy(&c.stdout).contains("FITS"));
    let en = vramfit().args(args).args(["--lang", "en"]).env("LANG", "zh_CN.UTF-8").output().expect("runs");
    assert!(String::from_utf8_lossy(&en.stdout).contains("RTX 4090: FITS"));
}

#[test]
fn json_is_the_same_in_every_language() {
    for args in [
        &["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--json"][..],
        &["estimate", "llama-2-13b", "--gpu", "rtx-4090", "--sweep", "--json"][..],
    ] {
        let en = vramfit().args(args).output().expect("runs");
        let zh = vramfit().args(args).args(["--lang", "zh"]).output().expect("runs");
        let env = vramfit().args(args).env("LANG", "zh_CN.UTF-8").output().expect("runs");
        assert_eq!(en.stdout, zh.stdout, "{args:?}");
        assert_eq!(en.stdout, env.stdout, "{args:?}");
        assert_eq!(en.status.code(), zh.status.code());
    }
}

/// A file `plan --emit` writes is the launcher's, byte-identical in every
/// language (it was wrapped at 100 columns under `--lang zh`).
#[test]
fn emitted_files_are_the_same_in_every_language() {
    for args in [
        &["plan", "llama-3.1-8b", "--emit", "vllm"][..],
        &["plan", "llama-2-7b", "--task", "train", "--emit", "deepspeed"][..],
        &["plan", "llama-2-7b", "--task", "lora", "--have", "rtx-4090", "--emit", "accelerate"][..],
    ] {
        let en = vramfit().args(args).output().expect("runs");
        let zh = vramfit().args(args).args(["--lang", "zh"]).output().expect("runs");
        assert_eq!(en.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&en.stdout), String::from_utf8_lossy(&zh.stdout), "{args:?}");
    }
}

#[test]
fn chinese_text_fits_the_width() {
    let out = vramfit()
        .args(["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--lang", "zh"])
        .env("COLUMNS", "60")
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    for l in text.lines().filter(|l| !l.trim_start().starts_with(['│', '┌', '├', '╞', '└'])) {
        assert!(vramfit_report::format::display_width(l) <= 60, "{l:?} is wider than 60 columns:\n{text}");
    }
}

/// The commonest first-contact errors read in Chinese with `--lang zh`
/// (stderr; the exit code and the English text without it unchanged); an
/// error the catalogue lacks stays English rather than half-translated.
#[test]
fn common_errors_in_chinese() {
    for (args, zh, en) in [
        (&["estimate", "no-such-model"][..], "未知模型 'no-such-model'", "unknown model 'no-such-model'"),
        (&["estimate", "llama-2-7b", "--batch", "0"][..], "--batch 至少为 1", "--batch must be at least 1"),
        (&["estimate", "llama-2-7b", "--gpu", "h2"][..], "GPU 名称 'h2' 有歧义", "GPU name 'h2' is ambiguous"),
        (
            &["estimate", "llama-2-7b", "--tp", "3"][..],
            "张量并行度不能整除 32 个注意力头",
            "does not divide the 32 attention heads",
        ),
    ] {
        let (_, err) = run(&[args, &["--lang", "zh"][..]].concat(), 2);
        assert!(err.starts_with("vramfit: error: ") && err.contains(zh), "{args:?}: {err}");
        let (_, err) = run(args, 2);
        assert!(err.contains(en), "{args:?}: {err}");
    }
}

/// Errors across subcommands (exit 2, stderr `vramfit: error: …`): bad
/// flag values, unknown models and GPUs, missing and malformed files, bad
/// config fields, flags that conflict or do not apply. Each must have
/// Chinese in the catalogue, and `--lang zh` must print exactly that
/// Chinese. clap's own parse errors (`error: invalid value …`, an unknown
/// flag) and `--help` are [`PARSE_ERRORS`] and [`help_paths`]' below.
const ERROR_CORPUS: &[&[&str]] = &[
    &["estimate"],
    &["estimate", "no-such-model"],
    &["estimate", "/nonexistent/config.json"],
    &["estimate", "../../Cargo.toml"],
    &["estimate", "llama-2-7b", "--batch", "0"],
    &["estimate", "llama-2-7b", "--context", "0"],
    &["estimate", "llama-2-7b", "--concurrency", "0"],
    &["estimate", "llama-2-7b", "--pp", "0"],
    &["estimate", "llama-2-7b", "--block-size", "0"],
    &["estimate", "llama-2-7b", "--gpu", "h2"],
    &["estimate", "llama-2-7b", "--gpu", "nosuchgpu"],
    &["estimate", "llama-2-7b", "--gpu-util", "0.9"],
    &["estimate", "llama-2-7b", "--gpu-mem", "lots"],
    &["estimate", "llama-2-7b", "--gpu-mem", "24"],
    &["estimate", "llama-2-7b", "--gpu-mem", "24G"],
    &["estimate", "llama-2-7b", "--gpu-mem", "7B"],
    &["estimate", "llama-2-7b", "--gpu-mem", "0GiB"],
    &["estimate", "llama-2-7b", "--tp", "3"],
    &["estimate", "llama-2-7b", "--ep", "2"],
    &["estimate", "llama-2-7b", "--task", "lora", "--engine", "megatron"],
    // DeepSpeed AutoEP's refusals: ZeRO-3, an engine without AutoEP, a family without a preset
    &[
        "estimate",
        "mixtral-8x7b",
        "--task",
        "train",
        "--engine",
        "deepspeed",
        "--gpus",
        "8",
        "--ep",
        "8",
        "--zero",
        "3",
    ],
    &["estimate", "mixtral-8x7b", "--task", "train", "--engine", "fsdp", "--gpus", "8", "--ep", "8"],
    &[
        "estimate",
        "gpt-oss-20b",
        "--task",
        "train",
        "--dtype",
        "bf16",
        "--engine",
        "deepspeed",
        "--gpus",
        "8",
        "--ep",
        "8",
    ],
    &[
        "estimate",
        "mixtral-8x7b",
        "--task",
        "train",
        "--engine",
        "deepspeed",
        "--gpus",
        "8",
        "--ep",
        "8",
        "--optimizer",
        "adamw-8bit",
    ],
    &["estimate", "mixtral-8x7b", "--task", "train", "--engine", "megatron", "--gpus", "8", "--ep", "3"],
    &["estimate", "llama-2-7b", "--gpus", "3", "--tp", "2"],
    &["estimate", "llama-2-7b", "--task", "lora", "--lora-rank", "0"],
    &["estimate", "llama-2-7b", "--task", "train", "--grad-accum", "0"],
    &["estimate", "llama-2-7b", "--task", "train", "--zero", "3", "--fsdp", "full-shard"],
    &["estimate", "llama-2-7b", "--task", "train", "--engine", "vllm"],
    &["estimate", "llama-2-7b", "--deepspeed", "ds.json"],
    &["estimate", "llama-2-7b", "--task", "train", "--deepspeed", "../../Cargo.toml"],
    &["estimate", "llama-2-7b", "-ngl", "5"],
    &["estimate", "../../fuzz/seeds/ingest_gguf/dense_f16.gguf", "--tp", "2"],
    &["plan", "llama-2-7b", "--have", "nosuchgpu"],
    &["plan", "llama-2-7b", "--tokens", "lots"],
    &["plan", "llama-2-7b", "--hours", "0"],
    &["plan", "llama-2-7b", "--output-len", "0"],
    &["plan", "llama-2-7b", "--mfu", "foo"],
    &["plan", "llama-2-7b", "--catalog", "/nonexistent.toml"],
    &["plan", "llama-2-7b", "--catalog", "../../Cargo.toml"],
    &["plan", "llama-2-7b", "--task", "train", "--launcher", "vllm"],
    &["plan", "llama-2-7b", "--launcher", "deepspeed"],
    &["diagnose", "/nonexistent.txt"],
    &["diagnose", "../../Cargo.toml"],
    &["diagnose", "../diagnose/tests/fixtures/oom/composed_multi_rank_log.txt", "--kind", "snapshot"],
    &["diagnose", "../diagnose/tests/fixtures/oom/composed_multi_rank_log.txt", "--model", "no-such-model"],
    &["mig", "plan", "--gpu", "a100-40gb", "--service", "chat"],
    &["mig", "plan", "--gpu", "a100-40gb", "--service", "chat=lots"],
    &["mig", "plan", "--gpu", "a100-40gb", "--service", "chat=-1GiB"],
    &["mig", "plan", "--gpu", "rtx-4090", "--service", "chat=1GiB"],
    &["mig", "profiles", "--gpu", "rtx-4090"],
    &["mig", "profiles", "--gpu", "a100-40gb", "--lgip", "/nonexistent.txt"],
    &["check", "--xml", "/nonexistent.xml"],
    &["check", "--xml", "../../Cargo.toml"],
    &["check", "--text", "../../Cargo.toml"],
    &["check", "--bandwidth", "../../Cargo.toml"],
    &["check", "--text", "../hw/tests/fixtures/bandwidth/autodl-2080ti.table.txt"],
    &["check", "--topo", "../hw/tests/fixtures/derived/13-nic-cell-dropped.topo.txt"],
    &["check", "--xml", "../hw/tests/fixtures/nvidia_smi/01.xml", "--expect", "2xNoSuchGPU"],
    &["check", "--fleet", "/nonexistent"],
    &["check", "--fleet", "../hw/tests/fixtures/fleet/autodl-4", "--expect-fabric", "foo"],
    &["calibrate", "--cases", "/nonexistent.jsonl"],
    &["calibrate", "--cases", "../../Cargo.toml"],
    &["calibrate", "--group", "Z"],
    // sentences that passed through in English: the frame in Chinese, names, flags and input verbatim
    &["estimate", "llama-2-7b", "--dtype", "foo"],
    &["estimate", "llama-2-7b", "--kv-dtype", "foo"],
    &["estimate", "llama-2-7b", "--task", "qlora", "--dtype", "fp16"],
    &["estimate", "llama-2-7b", "--svg", "/nonexistent/dir/x.svg"],
    &["estimate", "../../fuzz/seeds/ingest_gguf/dense_f16.gguf", "--cache-type-k", "foo"],
    &["estimate", "../../fuzz/seeds/ingest_gguf/dense_f16.gguf", "--flash-attn", "maybe"],
    &["estimate", "../../fuzz/seeds/ingest_gguf/dense_f16.gguf", "--tensor-split", "a,b"],
    &["estimate", "../../fuzz/seeds/ingest_gguf/dense_f16.gguf", "--override-tensor", "foo"],
    &["plan", "llama-2-7b", "--mfu", "ampere=2"],
    &["mig", "plan", "--gpu", "a100-40gb", "--service", "chat=llama-2-7b:task=foo"],
    &["mig", "profiles", "--gpu", "a100-40gb", "--lgip", "../../Cargo.toml"],
    &["check", "--list", "../../Cargo.toml"],
    &["check", "--p2p", "../../Cargo.toml"],
    &["check", "--nccl", "../../Cargo.toml"],
    &["check", "--xml", "../hw/tests/fixtures/nvidia_smi/01.xml", "--expect-fabric", "ib400"],
    &["calibrate", "--set", "throughput", "--group", "A"],
    &[
        "estimate",
        "mixtral-8x7b",
        "--task",
        "train",
        "--engine",
        "megatron",
        "--tp",
        "2",
        "--sp",
        "--ep",
        "8",
        "--etp",
        "2",
        "--gpus",
        "8",
    ],
    &["estimate", "llama-2-7b", "--task", "train", "--engine", "megatron", "--etp", "2"],
    &["estimate", "mixtral-8x7b", "--task", "train", "--etp", "2"],
];

#[test]
fn every_error_of_the_error_corpus_has_chinese() {
    let mut missing: Vec<String> = Vec::new();
    let mut distinct = std::collections::BTreeSet::new();
    for args in ERROR_CORPUS {
        let (_, en) = run(args, 2);
        let msg = en.trim_end().strip_prefix("vramfit: error: ").unwrap_or_else(|| panic!("{args:?}: {en}"));
        distinct.insert(msg.to_string());
        match translate(Lang::Zh, msg) {
            Ok(zh) => {
                // what --lang zh prints is that Chinese, exit code unchanged
                let (_, got) = run(&[*args, &["--lang", "zh"][..]].concat(), 2);
                assert_eq!(got.trim_end(), format!("vramfit: error: {zh}"), "{args:?}");
                assert_ne!(zh, msg, "{args:?}: the Chinese is the English");
            }
            Err(_) => missing.push(format!("{msg}\n      (from: vramfit {})", args.join(" "))),
        }
    }
    assert!(distinct.len() >= 30, "the corpus holds only {} distinct errors", distinct.len());
    assert!(
        missing.is_empty(),
        "{} error(s) have no Chinese. Add each to crates/report/src/i18n/zh.txt as an `en:`/`zh:` pair \
         (the file's head explains the holes):\n\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

/// The commands whose text `run_in` used to leave English (calibrate, the
/// lists, mig profiles) and `--explain` print Chinese with `--lang zh`.
#[test]
fn explain_lists_calibrate_and_mig_profiles_print_chinese() {
    for (args, code, zh) in [
        (&["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--explain"][..], 0, "每个数字的计算方法（每卡）："),
        (&["estimate", "--list-gpus"][..], 0, "内置 GPU 目录"),
        (&["estimate", "--list-presets"][..], 0, "内置模型预设"),
        (&["calibrate", "--group", "A"][..], 0, "个用例：|误差| 中位数"),
        (&["mig", "profiles", "--gpu", "a100-40gb"][..], 0, "的 MIG 配置："),
    ] {
        let (out, _) = run(&[args, &["--lang", "zh"][..]].concat(), code);
        assert!(out.contains(zh), "{args:?}:\n{out}");
        let (en, _) = run(args, code);
        assert!(!en.contains(zh), "{args:?}: English output holds Chinese");
    }
}

/// Whether `s` holds a Chinese character (CJK Unified Ideographs).
fn has_han(s: &str) -> bool {
    s.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

/// Whether `l` holds three English words in a row (lower-case letters, an
/// apostrophe allowed), outside `backticks`: a sentence left English inside
/// a Chinese frame (`的值 'x' 无效：invalid digit found in string`). Names,
/// flags, lists (`infer, train`) and identifiers break a run.
fn english_run(l: &str) -> bool {
    let mut run = 0;
    for (i, chunk) in l.split('`').enumerate() {
        if i % 2 == 1 {
            run = 0;
            continue;
        }
        for tok in chunk.split_whitespace() {
            let word = tok.len() >= 2 && tok.chars().all(|c| c.is_ascii_lowercase() || c == '\'');
            run = if word { run + 1 } else { 0 };
            if run >= 3 {
                return true;
            }
        }
    }
    false
}

/// The lines of Chinese output that are still English: English prose (as
/// the catalogue tells it: `needs_translation`) and not one Chinese
/// character, or an English phrase inside Chinese ([`english_run`]).
fn english_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| (!has_han(l) && vramfit_report::i18n::needs_translation(l)) || english_run(l))
        .map(|l| l.trim().to_string())
        .collect()
}

/// Every command and subcommand, as argv after `vramfit` (the top level is empty), from clap's definition.
fn help_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(path.clone());
        for s in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut p = path.clone();
            p.push(s.get_name().to_string());
            walk(s, p, out);
        }
    }
    let mut out = Vec::new();
    walk(&vramfit_cli::clap_lang::command(Lang::En), Vec::new(), &mut out);
    out
}

/// `--help` and `-h` of every command (and `help <command>`) read wholly in
/// Chinese under `--lang zh` and under `LANG=zh_CN.UTF-8` alike: each about,
/// each flag's help, each possible value's help, and clap's own words
/// (Usage, Options, [default: …], [aliases: …]). The English is clap's own
/// output (snapshot in `english_help_is_clap_as_derived`).
#[test]
fn help_of_every_command_reads_in_chinese() {
    let paths = help_paths();
    assert!(paths.len() >= 10, "{paths:?}");
    let mut missing: Vec<String> = Vec::new();
    for path in &paths {
        for flag in ["--help", "-h"] {
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            args.push(flag);
            let (en, _) = run(&args, 0);
            let (zh, _) = run(&[&args[..], &["--lang", "zh"]].concat(), 0);
            assert_ne!(en, zh, "{args:?}");
            assert!(zh.contains("用法："), "{args:?}:\n{zh}");
            for l in english_lines(&zh) {
                let line = format!("{l}\n      (from: vramfit {} --lang zh)", args.join(" "));
                if !missing.contains(&line) {
                    missing.push(line);
                }
            }
            let env = vramfit().args(&args).env("LANG", "zh_CN.UTF-8").output().expect("runs");
            assert_eq!(String::from_utf8_lossy(&env.stdout), zh, "{args:?}: LANG=zh_CN.UTF-8 differs from --lang zh");
        }
    }
    // `help estimate` is `estimate --help`
    let help = vramfit().args(["help", "estimate"]).env("LANG", "zh_CN.UTF-8").output().expect("runs");
    let help = String::from_utf8_lossy(&help.stdout);
    let (long, _) = run(&["estimate", "--help", "--lang", "zh"], 0);
    assert_eq!(help, long);
    assert!(
        missing.is_empty(),
        "{} help line(s) are English under --lang zh. Add each sentence to crates/report/src/i18n/zh.txt as an \
         `en:`/`zh:` pair (clap's own words are in crates/cli/src/clap_lang.rs):\n\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

/// The English help is clap's output as derived, byte for byte (what it was
/// before `--lang` reached clap): every command's `--help` in one snapshot.
#[test]
fn english_help_is_clap_as_derived() {
    let mut all = String::new();
    for path in help_paths() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let (en, _) = run(&args, 0);
        let env = vramfit().args(&args).env("LANG", "C").output().expect("runs");
        assert_eq!(String::from_utf8_lossy(&env.stdout), en, "{args:?}");
        all.push_str(&format!("$ vramfit {}\n{en}\n", args.join(" ")));
    }
    insta::assert_snapshot!("english_help", all);
}

/// clap's parse errors (exit 2): unknown flags and subcommands with their
/// tips, bad and missing values (clap's reasons, Rust's and vramfit's value
/// parsers'), missing required flags and subcommands, a flag given twice.
const PARSE_ERRORS: &[&[&str]] = &[
    &[],
    &["estimat"],
    &["mig"],
    &["mig", "plan"],
    &["estimate", "--foo"],
    &["estimate", "llama-2-7b", "extra"],
    &["estimate", "llama-2-7b", "--tensor-parallel", "2"],
    &["estimate", "llama-2-7b", "--batch"],
    &["estimate", "llama-2-7b", "--batch", "x"],
    &["estimate", "llama-2-7b", "--batch", "-1"],
    &["estimate", "llama-2-7b", "--batch", "99999999999999999999999"],
    &["estimate", "llama-2-7b", "--margin", "lots"],
    &["estimate", "llama-2-7b", "--task", "trian"],
    &["estimate", "llama-2-7b", "--task", "foo"],
    &["estimate", "llama-2-7b", "--precision", "foo"],
    &["estimate", "llama-2-7b", "--optimizer", "foo"],
    &["estimate", "llama-2-7b", "--engine", "foo"],
    &["estimate", "llama-2-7b", "--context", "12q"],
    &["estimate", "llama-2-7b", "--zero", "5"],
    &["estimate", "llama-2-7b", "--json", "--json"],
    &["plan", "llama-2-7b", "--emit", "foo"],
    &["check", "--xml"],
    &["diagnose"],
];

/// Each of [`PARSE_ERRORS`] under `LANG=zh_CN.UTF-8` reads wholly in Chinese
/// (the `error:` prefix kept, flags and values verbatim), exit code as in
/// English; the English is clap's own.
#[test]
fn parse_errors_read_in_chinese() {
    let mut missing: Vec<String> = Vec::new();
    for args in PARSE_ERRORS {
        let en = vramfit().args(*args).output().expect("runs");
        let zh = vramfit().args(*args).env("LANG", "zh_CN.UTF-8").output().expect("runs");
        assert_eq!(en.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&en.stderr));
        assert_eq!(zh.status.code(), en.status.code(), "{args:?}");
        let (en, zh) = (String::from_utf8_lossy(&en.stderr), String::from_utf8_lossy(&zh.stderr));
        // an error, or (no subcommand at all) the help, on stderr
        assert_eq!(en.starts_with("error: "), zh.starts_with("error: "), "{args:?}: {zh}");
        assert!(has_han(zh.lines().next().unwrap_or("")), "{args:?}: {zh}");
        // what the user typed is quoted as typed
        for a in args.iter().filter(|a| a.starts_with("--") && en.contains(&format!("'{a}"))) {
            assert!(zh.contains(&format!("'{a}")), "{args:?}: {a} not quoted in\n{zh}");
        }
        for l in english_lines(&zh) {
            missing.push(format!("{l}\n      (from: LANG=zh_CN.UTF-8 vramfit {})", args.join(" ")));
        }
    }
    assert!(
        missing.is_empty(),
        "{} line(s) of clap's errors are English under LANG=zh_CN.UTF-8. Add the sentence (a value parser's \
         reason) to crates/report/src/i18n/zh.txt, or clap's own to crates/cli/src/clap_lang.rs:\n\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

/// The lines `plan --emit` writes to stderr beside the launcher's file
/// (`launch with:`, the notes on a plan the launcher cannot run, a
/// DeepSpeed config's "auto" values) read in Chinese; the file on stdout is
/// the launcher's, the same in every language.
#[test]
fn emit_stderr_lines_read_in_chinese() {
    let ds =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../ingest/tests/fixtures/deepspeed/02_zero2_offload_optimizer_auto.json");
    let mut missing: Vec<String> = Vec::new();
    let mut lines = 0;
    for args in [
        &["plan", "llama-3.1-8b", "--emit", "vllm"][..],
        &[
            "plan",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--tokens",
            "1B",
            "--emit",
            "deepspeed",
        ][..],
        &[
            "plan",
            "llama-3.1-405b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--tokens",
            "1B",
            "--emit",
            "deepspeed",
        ][..],
        &["plan", "llama-2-7b", "--task", "train", "--deepspeed", ds][..],
    ] {
        let en = vramfit().args(args).output().expect("runs");
        let zh = vramfit().args(args).args(["--lang", "zh"]).output().expect("runs");
        assert_eq!(en.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&en.stderr));
        let (en_err, zh_err) = (String::from_utf8_lossy(&en.stderr), String::from_utf8_lossy(&zh.stderr));
        assert_eq!(en_err.lines().count(), zh_err.lines().count(), "{args:?}\n{en_err}\n{zh_err}");
        lines += zh_err.lines().count();
        // a `# …` line is the launch command's own shell comment (part of what is copied), kept as written
        for l in english_lines(&zh_err).into_iter().filter(|l| !l.starts_with('#')) {
            missing.push(format!("{l}\n      (from: vramfit {} --lang zh)", args.join(" ")));
        }
        if args.contains(&"--emit") {
            assert_eq!(en.stdout, zh.stdout, "{args:?}: the emitted file differs");
        }
    }
    assert!(lines >= 4, "the cases must write to stderr");
    assert!(
        missing.is_empty(),
        "{} stderr line(s) are English under --lang zh; add each to crates/report/src/i18n/zh.txt:\n\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}
