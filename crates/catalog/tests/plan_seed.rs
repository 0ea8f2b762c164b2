//! The planner on the embedded catalogue: the seed's must-show cases,
//! through `vramfit_plan::plan` with the real GPU list and offers.

use vramfit_catalog::offers::{load, Catalogue};
use vramfit_core::train::{Optimizer, Precision, TrainSetup};
use vramfit_core::{DType, InferenceSetup, ModelSpec, Sharding, Task, Workload, GIB};
use vramfit_plan::{plan, Allow, Job, Method, PlanReport, PlanRequest, TimeModel};

fn llama(b: u64) -> ModelSpec {
    match b {
        7 => ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000),
        13 => ModelSpec::llama_like("llama-2-13b", 5120, 40, 40, 40, 13824, 32000),
        _ => ModelSpec::llama_like("llama-2-70b", 8192, 80, 64, 8, 28672, 32000),
    }
}

fn full_ft(batch: u64, accum: u64) -> Workload {
    Workload {
        task: Task::Train(TrainSetup {
            precision: Precision::MixedBf16,
            batch,
            grad_accum: accum,
            ..TrainSetup::default()
        }),
        ..Workload::default()
    }
}

fn run(cat: &Catalogue, m: &ModelSpec, w: &Workload, have: Option<&str>, allow: Allow, job: Job) -> PlanReport {
    let have = have.map(|h| vramfit_catalog::find_gpu(&cat.gpus, h).unwrap());
    plan(&PlanRequest {
        model: m,
        workload: w,
        gpus: &cat.gpus,
        book: &cat.book,
        have,
        allow,
        job,
        top: 20,
        time: TimeModel::default(),
        launcher: None,
        output_len: None,
        one_gpu: false,
        engine_assumed: false,
        checkpointing_given: false,
    })
    .unwrap()
}

fn dump(r: &PlanReport) -> String {
    r.ranked
        .iter()
        .map(|x| {
            format!(
                "{} x{} {} {:.1}GiB states {:.1}GB {:?} cost {:?} h {:?}\n",
                x.offer_id,
                x.gpus,
                x.setup.sharding.label(),
                x.per_gpu_bytes as f64 / GIB as f64,
                x.model_states_bytes as f64 / 1e9,
                x.switches,
                x.job_cost.map(|c| c.low),
                x.job_hours
            )
        })
        .collect()
}

#[test]
fn llama7b_full_finetune_needs_sharding() {
    let cat = load(None).unwrap();
    let r = run(&cat, &llama(7), &full_ft(1, 8), None, Allow::default(), Job::None);
    // 16 B/param × 6.74 B = 107.8 GB of model states alone: no 80 GB card
    let need = r.baseline_bytes.unwrap();
    assert!(need > 85_899_345_920, "needs {need}");
    assert!(r.bigger_card.best.is_none(), "{:?}", r.bigger_card.best);
    for g in cat.gpus.iter().filter(|g| g.memory_gb == 80.0) {
        assert!(!r.bigger_card.gpus_that_fit.contains(&g.id), "{} listed as fitting", g.id);
    }
    // 8 × A100 40G with ZeRO-2 fits: model states 2Ψ + 14Ψ/8 = 13.48 + 11.79 = 25.27 GB per GPU
    let row = r
        .ranked
        .iter()
        .find(|x| x.gpu_id.starts_with("a100-40gb") && x.gpus == 8)
        .unwrap_or_else(|| panic!("no 8 × A100 40G row:\n{}", dump(&r)));
    assert!(row.fits);
    assert_eq!(row.setup.sharding, Sharding::Zero2, "{}", dump(&r));
    assert_eq!(row.setup.optimizer, Some(Optimizer::AdamW));
    let states = row.model_states_bytes as f64 / 1e9;
    // 2Ψ + 12Ψ/8 = 23.58 GB without the gradient partition (none yet at a backward peak), 25.27 GB with it
    assert!((23.5..25.8).contains(&states), "model states {states} GB");
    // plain DP keeps the whole job on each GPU, and DDP adds its gradient buckets
    // (a second bf16 copy of every gradient) and an NCCL communicator (the link not
    // known: 32 channels × 24 MiB + 256 MiB = 1024 MiB, crates/core/src/nccl.rs)
    let (dp, single) = (r.more_cards.dp_only_bytes.unwrap(), r.more_cards.single_bytes.unwrap());
    assert_eq!(dp - single, 2 * 6_738_415_616 + 1024 * (1 << 20), "DDP buckets + one NCCL communicator");
}

#[test]
fn llama7b_with_lora_allowed_goes_to_a_24gb_card() {
    let cat = load(None).unwrap();
    let allow = Allow { lora: true, ..Allow::default() };
    let r = run(&cat, &llama(7), &full_ft(1, 8), Some("rtx-3090"), allow, Job::None);
    let rec = r.recommended.as_ref().unwrap();
    assert_eq!(rec.setup.method, Method::Lora, "{}", dump(&r));
    assert_eq!(rec.gpus, 1);
    let gpu = cat.gpus.iter().find(|g| g.id == rec.gpu_id).unwrap();
    assert_eq!(gpu.memory_gb, 24.0, "recommended {}:\n{}", rec.gpu_id, dump(&r));
    // The ladder on the 3090 reaches a fit with LoRA, or with checkpointing
    // retried right after LoRA (at seq 2048 LoRA alone needs ~40 GiB: the
    // peak moves to backward, where checkpointing then pays) — never by offload.
    let l = r.software.as_ref().unwrap();
    let i = l.first_fit.expect("no fit on the ladder");
    let lora = l.steps.iter().position(|s| s.name == "LoRA").unwrap();
    assert!(i <= lora + 1, "first fit at step {i}:\n{}", dump(&r));
    assert!(matches!(l.steps[i].name.as_str(), "LoRA" | "activation checkpointing"), "fit by {}", l.steps[i].name);
}

#[test]
fn llama13b_fp16_inference_next_card_up() {
    let cat = load(None).unwrap();
    let w = Workload {
        task: Task::Inference(InferenceSetup { weight_dtype: DType::F16, ..InferenceSetup::default() }),
        ..Workload::default()
    };
    let r = run(&cat, &llama(13), &w, Some("rtx-3090"), Allow::default(), Job::None);
    let rec = r.recommended.as_ref().unwrap();
    assert_eq!(rec.gpus, 1, "{}", dump(&r));
    assert!(rec.gpu_memory_bytes > 24 * GIB);
    assert!(r.have_gap_bytes.unwrap() > 0);
    let on_have = r.more_cards.on_have.as_ref().expect("2 × 3090 would hold it");
    assert_eq!(on_have.gpus, 2);
    assert!(r.reason.contains("not worth sharding"), "{}", r.reason);
    // bf16 weights on a card without bf16 are not offered; fp16 here is fine on V100S but it does not fit
    assert!(r.ranked.iter().all(|x| x.fits));
}

#[test]
fn llama70b_full_finetune_goes_where_the_offload_ram_is() {
    let cat = load(None).unwrap();
    let r = run(&cat, &llama(70), &full_ft(1, 64), None, Allow::default(), Job::Tokens(1_000_000_000));
    // two A100 80G machines over InfiniBand hold it without offload, for less
    // than one H100 machine with offload
    let rec = r.recommended.as_ref().unwrap();
    assert_eq!((rec.gpus, rec.machines), (16, 2), "{}", dump(&r));
    assert_eq!(rec.offer_id, "cn-guide/8x-a100-80g-ib", "{}", dump(&r));
    assert_eq!(rec.setup.offload_optimizer, vramfit_core::workload::Offload::None, "{}", dump(&r));
    // on one machine: no 8 × 80 GB layout holds 70B × 16 B of states without offload; the
    // offload needs ~1.66 TB of host RAM (DeepSpeed's estimate): the A100 machine's 1 TB is
    // too small, the H100 machine's 2 TB holds it
    let one = r.ranked.iter().find(|x| x.machines == 1 && x.gpus == 8).expect("one machine of 8");
    assert!(one.gpu_memory_bytes > 79 * GIB, "{}", dump(&r));
    assert!(matches!(one.setup.sharding, Sharding::Zero2 | Sharding::Zero3), "{}", dump(&r));
    assert_eq!(one.offer_id, "cn-guide/8x-h100-sxm", "{}", dump(&r));
    assert!(r.ranked.iter().all(|x| x.offer_id != "cn-guide/8x-a100-80g-nvlink"), "{}", dump(&r));
    assert!(r.notes.iter().any(|n| n.contains("8 × A100 80G NVLink machine: left out")), "{:?}", r.notes);
}
