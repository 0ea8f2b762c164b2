//! The memory ledger: per-GPU bytes by category at the peak, each entry
//! with its explanation. Categories always sum to `total_bytes`.

use crate::error::CoreError;
use crate::explain::Explanation;
use serde::{Deserialize, Serialize};

/// Where memory goes. Serialized names are part of the JSON schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// model parameters in their storage dtype (quantized or not)
    Weights,
    /// fp32 master copy kept beside 16-bit weights (DeepSpeed/Megatron mixed precision)
    MasterWeights,
    Gradients,
    OptimizerStates,
    /// tensors saved for backward, or a forward's working set in inference
    Activations,
    KvCache,
    /// the batch × seq × vocab output (and its fp32 upcast / gradient)
    Logits,
    /// short-lived buffers at the peak (optimizer foreach temporaries, casts)
    Temporaries,
    /// CUDA context, cuBLAS/cuBLASLt workspaces: outside the allocator's live tensors
    Runtime,
    /// headroom for allocator rounding and fragmentation (the "×1.2" rule)
    Margin,
}

impl Category {
    pub const ALL: [Category; 10] = [
        Category::Weights,
        Category::MasterWeights,
        Category::Gradients,
        Category::OptimizerStates,
        Category::Activations,
        Category::KvCache,
        Category::Logits,
        Category::Temporaries,
        Category::Runtime,
        Category::Margin,
    ];

    /// The JSON key.
    pub fn key(self) -> &'static str {
        match self {
            Category::Weights => "weights",
            Category::MasterWeights => "master_weights",
            Category::Gradients => "gradients",
            Category::OptimizerStates => "optimizer_states",
            Category::Activations => "activations",
            Category::KvCache => "kv_cache",
            Category::Logits => "logits",
            Category::Temporaries => "temporaries",
            Category::Runtime => "runtime",
            Category::Margin => "margin",
        }
    }

    /// Is this a live tensor counted by `torch.cuda.max_memory_allocated()`?
    pub fn is_tensor(self) -> bool {
        !matches!(self, Category::Runtime | Category::Margin)
    }
}

/// When the peak happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Prefill,
    Decode,
    Forward,
    Backward,
    OptimizerStep,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Decode => "decode",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::OptimizerStep => "optimizer_step",
        }
    }
}

/// Where a line's bytes live on the device: what each measuring tool sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    /// a live tensor of the PyTorch caching allocator (`max_memory_allocated()`)
    #[default]
    Tensor,
    /// device memory outside the allocator: CUDA context, workspaces, NCCL
    /// buffers, CUDA managed memory (paged optimizer states)
    Outside,
    /// the caching allocator's overhead over its live tensors: block and segment
    /// rounding, cached free blocks (`max_memory_reserved() − max_memory_allocated()`)
    Allocator,
    /// headroom asked for on top of the prediction (`--margin`)
    Headroom,
}

impl Pool {
    /// The pool a line of `category` is in unless said otherwise.
    pub fn of(category: Category) -> Pool {
        match category {
            Category::Runtime => Pool::Outside,
            Category::Margin => Pool::Headroom,
            _ => Pool::Tensor,
        }
    }
}

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub category: Category,
    /// what this line is, e.g. "linear weights (int4 g128)"
    pub label: String,
    pub bytes: u64,
    pub explain: Explanation,
    /// where the bytes live (what `max_memory_allocated()`, `max_memory_reserved()`
    /// and nvidia-smi each see)
    #[serde(default)]
    pub pool: Pool,
}

/// Per-GPU memory at the peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    pub entries: Vec<Entry>,
    pub peak_phase: Phase,
    /// GPUs the job runs on (each holds this ledger, the worst rank)
    pub gpus: u64,
    pub params_total: u64,
    pub params_active: u64,
    pub params_trainable: u64,
    /// Host RAM the whole job needs for offloaded state: the sum over all its
    /// ranks, on all machines (per rank: `train::ModelStates::cpu_bytes`; per
    /// machine: this ÷ machines). The one meaning of `cpu_bytes` everywhere.
    pub cpu_bytes: u64,
    /// NVMe the whole job needs for offloaded state (all ranks, as `cpu_bytes`)
    pub nvme_bytes: u64,
    /// statements the user should see (assumptions, "DP saves no memory", …)
    pub notes: Vec<String>,
}

impl Ledger {
    pub fn new(peak_phase: Phase, gpus: u64) -> Ledger {
        Ledger {
            entries: Vec::new(),
            peak_phase,
            gpus,
            params_total: 0,
            params_active: 0,
            params_trainable: 0,
            cpu_bytes: 0,
            nvme_bytes: 0,
            notes: Vec::new(),
        }
    }

    pub fn push(&mut self, category: Category, label: impl Into<String>, bytes: u64, explain: Explanation) {
        self.push_in(Pool::of(category), category, label, bytes, explain);
    }

    /// A line in a pool other than its category's usual one (paged optimizer
    /// states outside the allocator, the allocator's own overhead).
    pub fn push_in(
        &mut self,
        pool: Pool,
        category: Category,
        label: impl Into<String>,
        bytes: u64,
        explain: Explanation,
    ) {
        self.entries.push(Entry { category, label: label.into(), bytes, explain, pool });
    }

    fn sum_where(&self, keep: impl Fn(&Entry) -> bool) -> u64 {
        self.entries.iter().filter(|e| keep(e)).fold(0u64, |a, e| a.saturating_add(e.bytes))
    }

    /// Bytes of one pool.
    pub fn pool_bytes(&self, pool: Pool) -> u64 {
        self.sum_where(|e| e.pool == pool)
    }

    /// What `torch.cuda.max_memory_reserved()` would show: live tensors and the
    /// allocator's overhead.
    pub fn reserved_bytes(&self) -> u64 {
        self.sum_where(|e| matches!(e.pool, Pool::Tensor | Pool::Allocator))
    }

    /// What nvidia-smi would show as used by this process: reserved + everything
    /// outside the allocator (context, workspaces, NCCL, managed memory); `--margin`
    /// headroom is not memory in use.
    pub fn device_bytes(&self) -> u64 {
        self.sum_where(|e| e.pool != Pool::Headroom)
    }

    /// Allocated tensors that outlive a step: weights, master weights and
    /// optimizer states (what is still allocated after training), and a KV
    /// cache (allocated once and kept). Everything else is transient: what the
    /// caching allocator fragments.
    pub fn persistent_bytes(&self) -> u64 {
        self.sum_where(|e| {
            e.pool == Pool::Tensor
                && matches!(
                    e.category,
                    Category::Weights | Category::MasterWeights | Category::OptimizerStates | Category::KvCache
                )
        })
    }

    // The sums below cannot saturate for a ledger built by `estimate()`: every
    // builder refuses a ledger whose `checked_total` overflows (an error naming
    // the quantity), and each sum here is a part of that total. A ledger built
    // by hand should call `checked_total` before reading them.

    /// Bytes of one category (sum of its entries).
    pub fn bytes(&self, category: Category) -> u64 {
        self.entries.iter().filter(|e| e.category == category).fold(0u64, |a, e| a.saturating_add(e.bytes))
    }

    /// Model-state bytes: weights + master weights + gradients + optimizer
    /// states (what ZeRO shards and what offload moves). Checked: a sum that
    /// overflows 64 bits is an error, not a saturated figure.
    pub fn model_states_bytes(&self) -> Result<u64, CoreError> {
        crate::units::sum(
            "model states",
            &[
                self.bytes(Category::Weights),
                self.bytes(Category::MasterWeights),
                self.bytes(Category::Gradients),
                self.bytes(Category::OptimizerStates),
            ],
        )
    }

    /// What `torch.cuda.max_memory_allocated()` would show: live tensors at the peak.
    pub fn tensor_peak_bytes(&self) -> u64 {
        self.pool_bytes(Pool::Tensor)
    }

    /// Everything: tensors + runtime + margin. Equals the sum of categories.
    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().fold(0u64, |a, e| a.saturating_add(e.bytes))
    }

    /// Checked total (the ledger builders use this to refuse overflow).
    pub fn checked_total(&self) -> Result<u64, CoreError> {
        self.entries
            .iter()
            .try_fold(0u64, |a, e| a.checked_add(e.bytes))
            .ok_or_else(|| CoreError::Overflow { what: "total per-GPU bytes".into() })
    }

    /// Categories with their byte sums, in display order, zeros included.
    pub fn categories(&self) -> Vec<(Category, u64)> {
        Category::ALL.iter().map(|&c| (c, self.bytes(c))).collect()
    }
}
