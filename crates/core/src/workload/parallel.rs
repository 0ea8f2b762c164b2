//! How a job is split over GPUs: tensor, pipeline and data parallelism,
//! ZeRO / FSDP sharding of model states, offload.

use serde::{Deserialize, Serialize};

/// ZeRO / FSDP sharding of model states over data-parallel ranks.
///
/// One spelling per audience: the serde name (`none`, `zero1`, `zero2`,
/// `zero3`, from `rename_all`) in every JSON document, [`Sharding::label`] /
/// [`Parallelism::sharding_label`] (`ZeRO-2`, `FSDP FULL_SHARD`) in sentences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharding {
    /// plain data parallelism: every rank holds everything
    #[default]
    None,
    /// ZeRO-1: optimizer states sharded
    Zero1,
    /// ZeRO-2 / FSDP SHARD_GRAD_OP: + gradients sharded
    Zero2,
    /// ZeRO-3 / FSDP FULL_SHARD: + parameters sharded
    Zero3,
}

impl Sharding {
    pub const ALL: [Sharding; 4] = [Sharding::None, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3];

    pub fn stage(self) -> u8 {
        match self {
            Sharding::None => 0,
            Sharding::Zero1 => 1,
            Sharding::Zero2 => 2,
            Sharding::Zero3 => 3,
        }
    }

    pub fn from_stage(stage: u8) -> Option<Sharding> {
        Sharding::ALL.into_iter().find(|s| s.stage() == stage)
    }

    /// How a sentence names it with DeepSpeed's words (`ZeRO-2`; `none`).
    pub fn label(self) -> &'static str {
        match self {
            Sharding::None => "none",
            Sharding::Zero1 => "ZeRO-1",
            Sharding::Zero2 => "ZeRO-2",
            Sharding::Zero3 => "ZeRO-3",
        }
    }
}

/// Where offloaded state goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Offload {
    #[default]
    None,
    Cpu,
    Nvme,
}

impl Offload {
    pub const ALL: [Offload; 3] = [Offload::None, Offload::Cpu, Offload::Nvme];

    /// The JSON spelling (the serde name), also the DeepSpeed `device` value.
    pub fn key(self) -> &'static str {
        match self {
            Offload::None => "none",
            Offload::Cpu => "cpu",
            Offload::Nvme => "nvme",
        }
    }

    pub fn is_some(self) -> bool {
        self != Offload::None
    }
}

fn one() -> u64 {
    1
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

/// How the job is split over GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parallelism {
    /// total GPUs (= tp × cp × pp × dp)
    pub gpus: u64,
    /// tensor-parallel degree (Megatron column/row splits)
    pub tp: u64,
    /// pipeline stages
    pub pp: u64,
    /// expert-parallel degree (MoE serving: whole routed experts split over
    /// this many ranks instead of each expert split by TP); 1: none
    #[serde(default = "one")]
    pub ep: u64,
    /// expert-tensor-parallel degree (MoE training under Megatron-LM,
    /// `--expert-tensor-parallel-size`): each of a rank's `experts / ep`
    /// routed experts is split column/row-wise over this many ranks, like a
    /// TP linear. Megatron's expert grid folds the ranks of a pipeline stage
    /// as ETP × EP × expert-DP = TP × CP × DP (`initialize_model_parallel`,
    /// megatron/core/parallel_state.py: `expert_data_parallel_size =
    /// world_size // (expert_tensor_parallel_size × expert_model_parallel_size
    /// × pipeline_model_parallel_size)`). 0: unset, resolved by
    /// [`Self::expert_tp`]
    #[serde(default, skip_serializing_if = "is_zero")]
    pub etp: u64,
    /// data-parallel attention (MoE serving): the `tp` ranks run attention,
    /// the dense layers and the KV cache as this many data-parallel groups
    /// of `tp / dp_attention` ranks, each serving its own share of the
    /// sequences, while the routed experts stay split over all `ep` = `tp`
    /// ranks (SGLang `--enable-dp-attention --dp N`: `attn_tp_size =
    /// tp_size // dp_size`, `compute_dp_attention_world_info` in
    /// sglang/srt/layers/dp_attention.py; vLLM `--data-parallel-size N
    /// --enable-expert-parallel`: `FusedMoEParallelConfig.make` sets
    /// `ep_size = dp_size × tp_size`); 1: none
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub dp_attention: u64,
    /// virtual pipeline stages per rank (the interleaved 1F1B schedule:
    /// Megatron-LM `--num-layers-per-virtual-pipeline-stage` = layers /
    /// (pp × this), torchtitan `Interleaved1F1B`; Narayanan et al. 2021
    /// §2.2.2); 1: plain 1F1B
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub virtual_stages: u64,
    pub sharding: Sharding,
    /// FSDP spelling of the sharding was used (affects names in output only)
    pub fsdp: bool,
    /// Megatron sequence parallelism (with tp > 1)
    pub sequence_parallel: bool,
    /// offload optimizer states (and, with ZeRO-3, parameters)
    pub offload_optimizer: Offload,
    pub offload_params: Offload,
    /// context-parallel degree (training): each rank of a CP group holds
    /// seq / cp tokens of every sequence and exchanges K/V blocks with the
    /// others in attention (Megatron-LM `--context-parallel-size`,
    /// TransformerEngine `cp_comm_type p2p`; torchtitan
    /// `context_parallel_degree`; Liu et al. 2023, Ring Attention); 1: none
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub cp: u64,
    /// hybrid sharding (HSDP): the data-parallel ranks form this many
    /// replicas, each sharding the ZeRO-3 / FSDP model states over its
    /// `dp / dp_replicate` ranks (usually the GPUs of one machine) and
    /// all-reducing its gradient shard with the same shard of the other
    /// replicas (PyTorch FSDP `ShardingStrategy.HYBRID_SHARD`, Zhao et al.
    /// 2023 "PyTorch FSDP" §3.2.2; FSDP2 `fully_shard(mesh=2-D)`; torchtitan
    /// `data_parallel_replicate_degree`); 1: states sharded over every
    /// data-parallel rank
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub dp_replicate: u64,
    /// DeepSpeed ZeRO++ hierarchical partitioning (hpZ): besides the ZeRO-3
    /// shard over every data-parallel rank, each rank keeps a secondary
    /// 16-bit partition of the parameters over its group of this many
    /// consecutive ranks (usually one machine), from which backward's
    /// all-gathers run inside the group (`zero_optimization.
    /// zero_hpz_partition_size`, deepspeed/runtime/zero/config.py;
    /// `_partition_param_sec`, deepspeed/runtime/zero/partition_parameters.py;
    /// Wang et al. 2023 "ZeRO++" §3.2); 1: none
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub hpz: u64,
}

impl Default for Parallelism {
    fn default() -> Self {
        Parallelism {
            gpus: 1,
            tp: 1,
            pp: 1,
            ep: 1,
            etp: 0,
            dp_attention: 1,
            virtual_stages: 1,
            sharding: Sharding::None,
            fsdp: false,
            sequence_parallel: false,
            offload_optimizer: Offload::None,
            offload_params: Offload::None,
            cp: 1,
            dp_replicate: 1,
            hpz: 1,
        }
    }
}

impl Parallelism {
    /// Data-parallel degree: the replicas that each take their own
    /// sequences (the global batch is micro-batch × accumulation × this),
    /// GPUs / (TP × CP × PP).
    pub fn dp(&self) -> u64 {
        let tp_pp = self.tp.max(1).saturating_mul(self.pp.max(1)).saturating_mul(self.cp.max(1));
        (self.gpus / tp_pp).max(1)
    }

    /// The ranks that hold the same layers and reduce their gradients
    /// together, over which ZeRO / FSDP / the distributed optimizer shard the
    /// model states: DP × CP = GPUs / (TP × PP). The ranks of a CP group see
    /// different tokens of the same sequences, so their gradients are reduced
    /// and their states sharded like data-parallel ranks: Megatron-LM's
    /// `DistributedDataParallel` builds its gradient buffers (and the
    /// distributed optimizer its shards) over
    /// `get_data_parallel_group(with_context_parallel=True)`
    /// (megatron/core/distributed/distributed_data_parallel.py); torchtitan's
    /// FSDP shards over the `dp_shard_cp` mesh (`ParallelDims.build_mesh`,
    /// torchtitan/distributed/parallel_dims.py). Equal to [`Self::dp`] without CP.
    pub fn shard_dp(&self) -> u64 {
        let tp_pp = self.tp.max(1).saturating_mul(self.pp.max(1));
        (self.gpus / tp_pp).max(1)
    }

    /// Data-parallel ranks the sharded model states are split over: every
    /// data-parallel rank, or under hybrid sharding the `dp / dp_replicate`
    /// ranks of one replica (its shard group). `validate` refuses a
    /// `dp_replicate` that does not divide the data-parallel degree.
    /// With context parallelism the shard group also spans the CP ranks
    /// ([`Self::shard_dp`]; torchtitan's `dp_shard_cp` mesh).
    pub fn shard_degree(&self) -> u64 {
        let r = self.dp_replicate.max(1);
        if self.dp().is_multiple_of(r) {
            (self.shard_dp() / r).max(1)
        } else {
            self.shard_dp()
        }
    }

    /// ZeRO++ hpZ is on: a secondary parameter partition over groups of `hpz` ranks.
    pub fn hpz_on(&self) -> bool {
        self.hpz > 1
    }

    /// The expert-tensor-parallel degree the routed experts are split by:
    /// `etp` when set; unset, TP without expert parallelism (Megatron-LM's own
    /// default, `args.expert_tensor_parallel_size = args.tensor_model_parallel_size`
    /// in megatron/training/arguments.py `validate_args`: the experts split
    /// like any TP linear) and 1 with it (the experts whole on each EP rank,
    /// as `plan --emit megatron` writes `--expert-tensor-parallel-size 1`).
    pub fn expert_tp(&self) -> u64 {
        match self.etp {
            0 if self.ep > 1 => 1,
            0 => self.tp.max(1),
            e => e,
        }
    }

    /// Ranks the distributed optimizer shards the routed experts' states
    /// over: the expert-data-parallel group, GPUs / (PP × EP × ETP)
    /// (megatron/core/parallel_state.py `initialize_model_parallel`,
    /// `expert_data_parallel_size`; experts do not use CP, so the CP ranks
    /// fold into it).
    pub fn expert_dp(&self) -> u64 {
        let grid = self.pp.max(1).saturating_mul(self.ep.max(1)).saturating_mul(self.expert_tp());
        (self.gpus / grid).max(1)
    }

    /// Hybrid sharding (HSDP) is on: more than one replica of the shards.
    pub fn hybrid(&self) -> bool {
        self.dp_replicate > 1
    }

    /// Tensor-parallel degree of attention, the dense layers and the KV
    /// cache: `tp`, or `tp / dp_attention` with data-parallel attention.
    pub fn attn_tp(&self) -> u64 {
        (self.tp.max(1) / self.dp_attention.max(1)).max(1)
    }

    /// The sharding as a sentence names it: `ZeRO-1`, `ZeRO-2`, `ZeRO-3`, or
    /// FSDP's `SHARD_GRAD_OP` / `FULL_SHARD` when FSDP was asked for.
    pub fn sharding_label(&self) -> &'static str {
        match (self.sharding, self.fsdp) {
            (Sharding::Zero2, true) => "FSDP SHARD_GRAD_OP",
            (Sharding::Zero3, true) => "FSDP FULL_SHARD",
            (s, _) => s.label(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_json_spelling_per_value() {
        for s in Sharding::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(serde_json::from_value::<Sharding>(json.clone()).unwrap(), s);
            // the JSON name is the label's words in lower case without the dash (ZeRO-2 → zero2)
            assert_eq!(json, s.label().to_ascii_lowercase().replace('-', ""));
            assert_eq!(Sharding::from_stage(s.stage()), Some(s));
        }
        for o in Offload::ALL {
            assert_eq!(serde_json::to_value(o).unwrap(), o.key());
        }
    }
}
