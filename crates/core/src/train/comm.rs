//! Buffers a data-parallel engine keeps for communication: DeepSpeed's ZeRO
//! reduce buckets, PyTorch DDP's gradient buckets, FSDP's reduce-scatter
//! input, and the NCCL communicators each rank holds.

use crate::error::CoreError;
use crate::runtime::Communicator;
use crate::units::{mul, product};
use crate::workload::{CommSetup, Parallelism};

/// DeepSpeed ZeRO's gradient reduction buffers (`ipg_buffer`): one
/// `reduce_bucket_size` buffer of the gradient dtype, two with `overlap_comm`
/// so reduction overlaps backward (`deepspeed/runtime/zero/stage_1_and_2.py`).
/// The all-gather after the step writes into the flat parameter buffers, so
/// `allgather_bucket_size` only sets its chunking, not extra memory.
pub fn deepspeed_bucket_bytes(comm: &CommSetup, elem_bytes: u64) -> Result<u64, CoreError> {
    product("DeepSpeed reduce buckets", &[comm.reduce_bucket, elem_bytes, if comm.overlap_comm { 2 } else { 1 }])
}

/// PyTorch DDP's gradient buckets: the reducer keeps every gradient in a flat
/// bucket; unless `gradient_as_bucket_view=True` the `.grad` tensors are a
/// second copy (`torch/nn/parallel/distributed.py`).
pub fn ddp_bucket_bytes(comm: &CommSetup, trainable: u64, grad_bytes: u64) -> Result<u64, CoreError> {
    if comm.grad_as_bucket_view {
        return Ok(0);
    }
    mul("DDP gradient buckets", trainable, grad_bytes)
}

/// The NCCL communicators one training rank holds: one per parallel group
/// it belongs to with more than one rank (data parallel, tensor parallel) and
/// one per pipeline neighbour for the point-to-point activations.
pub fn training_communicators(par: &Parallelism) -> Vec<Communicator> {
    let mut v = Vec::new();
    // the gradient group spans DP × CP ([`Parallelism::shard_dp`])
    let dp = par.shard_dp();
    if dp > 1 {
        v.push(Communicator::torch("data parallel", dp));
    }
    if par.cp > 1 {
        v.push(Communicator::torch("context parallel", par.cp));
    }
    if par.hybrid() {
        // hybrid sharding runs its collectives on two more groups: the shard group
        // (all-gather, reduce-scatter) and the replicate group (all-reduce of the
        // gradient shard). FSDP1 HYBRID_SHARD creates both
        // (`_init_intra_and_inter_node_groups`, torch/distributed/fsdp/_init_utils.py),
        // FSDP2 / torchtitan take them from the 2-D device mesh (`dp_replicate`,
        // `dp_shard`); the data-parallel group above stays for the loss and barriers
        v.push(Communicator::torch("HSDP shard group", par.shard_degree()));
        v.push(Communicator::torch("HSDP replicate group", par.dp_replicate));
    }
    if par.hpz_on() {
        // ZeRO++ hpZ: the secondary partition's all-gathers run on their own group of
        // consecutive ranks (`groups._create_zero_param_parallel_group`, deepspeed/utils/groups.py)
        v.push(Communicator::torch("ZeRO++ hpZ group", par.hpz));
    }
    if par.tp > 1 {
        v.push(Communicator::torch("tensor parallel", par.tp));
    }
    if par.pp > 1 {
        v.push(Communicator::torch("pipeline send/recv", 2));
        if par.pp > 2 {
            v.push(Communicator::torch("pipeline send/recv", 2));
        }
    }
    v
}
