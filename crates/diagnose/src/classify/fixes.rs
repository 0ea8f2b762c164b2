//! The fixes of each PyTorch verdict, cheapest first (their texts are
//! data: what to change and why it helps).

use super::{fix, Fix, FixCost};
use crate::oom::{Activity, TorchEra};

/// The driver reports less total than free (APUs).
pub(crate) fn free_above_total() -> Vec<Fix> {
    vec![
        fix(FixCost::Setting, "check the memory the driver gives the GPU (BIOS/driver UMA or GTT size on APUs; HSA_XNACK / unified-memory settings)", "the total the allocator sees is below the free figure"),
        fix(FixCost::Workload, "split or shrink the allocation below the reported total", "the allocator refuses requests above the reported total"),
    ]
}

/// Figures that cannot all be true.
pub(crate) fn contradictory() -> Vec<Fix> {
    vec![
        fix(
            FixCost::Setting,
            "take the message from the failing run's own log, unedited (all figures of one OOM come from one print)",
            "the figures as given cannot all describe one card",
        ),
        fix(
            FixCost::Setting,
            "capture a memory snapshot (torch.cuda.memory._record_memory_history) and run `vramfit diagnose` on it",
            "it records the allocator's state at the OOM",
        ),
    ]
}

/// One request larger than the card.
pub(crate) fn request_exceeds_card() -> Vec<Fix> {
    vec![
        fix(FixCost::Code, "split the operation that makes this tensor (chunk it over the batch or sequence; memory-efficient attention; chunked loss)", "no allocator setting can place a tensor larger than the card"),
        fix(FixCost::Workload, "lower batch size / sequence length / image resolution for this step", "the tensor's size is proportional to them"),
        fix(FixCost::Hardware, "tensor parallelism or a card with more memory", "splits the tensor itself across GPUs"),
    ]
}

/// `set_per_process_memory_fraction` is the limit.
pub(crate) fn cap() -> Vec<Fix> {
    vec![fix(
        FixCost::Setting,
        "raise torch.cuda.set_per_process_memory_fraction",
        "the cap, not the card, is the limit",
    )]
}

/// The card reported enough free memory.
pub(crate) fn free_covers_request() -> Vec<Fix> {
    vec![
        fix(FixCost::Housekeeping, "check other processes at the moment of failure (nvidia-smi --query-compute-apps=pid,used_memory --format=csv -l 1)", "a transient neighbour explains free memory reported after the failure"),
        fix(FixCost::Setting, "capture a memory snapshot (torch.cuda.memory._record_memory_history) and run `vramfit diagnose` on it", "it shows the allocator's state at the OOM"),
    ]
}

/// Memory held outside the job; `small_many`: several small processes
/// (other ranks' stray contexts).
pub(crate) fn other_process(small_many: bool) -> Vec<Fix> {
    let mut fixes = vec![fix(
        FixCost::Housekeeping,
        "stop or move the other processes (nvidia-smi --query-compute-apps=pid,used_memory --format=csv), or pick a free card with CUDA_VISIBLE_DEVICES",
        "their memory is what is missing",
    )];
    if small_many {
        fixes.push(fix(
            FixCost::Code,
            "call torch.cuda.set_device(local_rank) before any CUDA work in every rank",
            "several small processes on one card are usually the other ranks' stray CUDA contexts on GPU 0",
        ));
    }
    fixes
}

/// A message cut before its figures.
pub(crate) fn partial_message() -> Vec<Fix> {
    vec![fix(
        FixCost::Setting,
        "paste the whole message, or torch.cuda.memory_summary() printed in the except block",
        "the free/reserved figures decide the cause",
    )]
}

/// The cache is split: let segments grow in place, keep shapes steady.
pub(crate) fn fragmentation(era: TorchEra) -> Vec<Fix> {
    let mut f = vec![];
    if era == TorchEra::Sentences {
        f.push(fix(
            FixCost::Setting,
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "segments grow in place instead of being fixed cudaMalloc blocks, so freed space inside a segment can serve a larger request",
        ));
    } else {
        f.push(fix(
            FixCost::Setting,
            "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 (try 128–512)",
            "on this PyTorch (before expandable segments) blocks above the limit are never split, so large free blocks stay whole for large requests; upgrading to PyTorch ≥ 2.1 and using expandable_segments:True is the better fix",
        ));
    }
    f.push(fix(
        FixCost::Code,
        "keep tensor shapes steady (pad sequences to a few fixed lengths, drop_last=True)",
        "varying shapes leave differently sized holes in the cache every step",
    ));
    f
}

/// Live tensors fill the card: shrink them, by what the job was doing.
pub(crate) fn shortage(activity: Option<Activity>) -> Vec<Fix> {
    let mut f = vec![];
    match activity {
        Some(Activity::OptimizerStep) | Some(Activity::Setup) => {
            f.push(fix(
                FixCost::Code,
                "8-bit or paged optimizer (bitsandbytes AdamW8bit)",
                "Adam keeps two fp32 states per parameter (8 B); 8-bit states take 2 B",
            ));
            f.push(fix(
                FixCost::Code,
                "shard optimizer states/gradients (ZeRO-1/2, FSDP SHARD_GRAD_OP) or offload them to CPU",
                "each rank then holds 1/N of the states",
            ));
        }
        Some(Activity::Generation) => {
            f.push(fix(
                FixCost::Workload,
                "lower batch × (prompt + new tokens)",
                "the KV cache grows with every generated token",
            ));
        }
        _ => {
            f.push(fix(
                FixCost::Code,
                "activation (gradient) checkpointing",
                "saved activations are recomputed in backward instead of kept",
            ));
            f.push(fix(
                FixCost::Workload,
                "halve the micro-batch and double gradient accumulation",
                "activations scale with the micro-batch; the effective batch stays the same",
            ));
        }
    }
    f.push(fix(FixCost::Code, "bf16/fp16 mixed precision if not already on", "halves activation and weight bytes"));
    f.push(fix(
        FixCost::Hardware,
        "more GPUs with sharding (FSDP/ZeRO-3), or a card with more memory",
        "the job needs more memory than this card has free",
    ));
    f
}
