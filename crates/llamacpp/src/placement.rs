//! Which device holds which weights, and the model buffers that result.
//!
//! llama.cpp (`llama_model::load_tensors`, `src/llama-model.cpp`) numbers
//! `n_layer + 1` slots: the repeating layers `0..n_layer` and the output
//! layer as slot `n_layer`. With `-ngl N` the *last* `N` slots go to the
//! GPUs: since ggml-org/llama.cpp PR #18148 (merged 2025-12-17, "offload
//! output layer to GPU first") `i_gpu_start = max(n_layer + 1 - N, 0)`, so
//! `-ngl 1` offloads the output layer alone and `-ngl n_layer` leaves only
//! nothing but the input layer on the host; before it, `i_gpu_start =
//! max(n_layer - N, 0)` and the output layer moved last, at `-ngl n_layer+1`
//! ([`OffloadOrder::OutputLast`]). Offloaded slots are spread over the GPUs
//! by `--tensor-split` (default: proportional to free memory): slot `il`
//! goes to the first GPU whose cumulative share exceeds
//! `(il - i_gpu_start) / act_gpu_layers` (`std::upper_bound`). The input
//! layer (token embeddings) always stays on the host.
//!
//! Buffer sizes (`ggml_backend_alloc_ctx_tensors_from_buft`): each tensor
//! takes `GGML_PAD(alloc_size, alignment)`; CUDA's alignment is 128 bytes
//! and its `get_alloc_size` pads a quantized tensor whose row length is not
//! a multiple of `MATRIX_ROW_PADDING` (512) by the bytes of the missing
//! elements (`ggml_backend_cuda_buffer_type_get_alloc_size`). Host tensors
//! read through mmap form one `CPU_Mapped` buffer spanning the file range
//! from the first to the last host tensor (`llama_model_loader::
//! get_mapping_range`); without mmap they are copied into a `CPU` buffer
//! (32-byte aligned).

use crate::ggml::GgmlType;
use crate::graph::Device;
use crate::model::{LlamaModel, Slot, TensorInfo};
use serde::{Deserialize, Serialize};
use vramfit_core::units::{add, sum};
use vramfit_core::CoreError;
use vramfit_core::Explanation;

/// CUDA buffer alignment (`ggml_backend_cuda_buffer_type_get_alignment`).
pub const CUDA_ALIGNMENT: u64 = 128;
/// Host buffer alignment (`TENSOR_ALIGNMENT` in `ggml-backend.cpp`).
pub const CPU_ALIGNMENT: u64 = 32;
/// CUDA pads quantized rows to a multiple of this many elements (`MATRIX_ROW_PADDING`).
pub const MATRIX_ROW_PADDING: u64 = 512;

/// Which end of the model `-ngl` offloads first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OffloadOrder {
    /// llama.cpp since PR #18148 (2025-12-17): the output layer, then the last repeating layers
    #[default]
    OutputFirst,
    /// before PR #18148: the last repeating layers, the output layer only at `n_layer + 1`
    OutputLast,
}

/// Device of every slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// device of repeating layer `i`
    pub layers: Vec<Device>,
    pub output: Device,
    /// GPU slots counted as llama.cpp prints "offloaded X/Y layers"
    pub offloaded: u32,
    /// `--n-cpu-moe N` (`--cpu-moe`: every layer): the routed-expert
    /// tensors of layers `0..N` stay on the host, see [`is_routed_expert`]
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_expert_layers: u32,
    /// `-ot/--override-tensor`: the first pattern found in a tensor's name
    /// sends it to that device, before any other rule
    #[serde(default, skip_serializing_if = "TensorOverrides::is_empty")]
    pub overrides: TensorOverrides,
    pub explain: Explanation,
}

/// llama.cpp's `-ot PATTERN=BUFT` list (`tensor_buft_overrides`,
/// `load_tensors` in src/llama-model.cpp): for each tensor the first
/// pattern `std::regex_search` finds in its name picks the buffer type.
/// `CPU` means host memory (since PR #14990 the GPU's host buffer type is
/// preferred, demoted to CPU_Mapped with mmap); `CUDA<n>` that GPU.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TensorOverrides {
    pub rules: Vec<(String, Device)>,
    #[serde(skip)]
    compiled: Vec<regex::Regex>,
}

impl PartialEq for TensorOverrides {
    fn eq(&self, o: &Self) -> bool {
        self.rules == o.rules
    }
}

impl TensorOverrides {
    /// Compile the patterns; an invalid one is an error naming it.
    pub fn new(rules: Vec<(String, Device)>) -> Result<TensorOverrides, String> {
        let compiled = rules
            .iter()
            .map(|(p, _)| regex::Regex::new(p).map_err(|e| format!("'{p}' is not a regular expression: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TensorOverrides { rules, compiled })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The device the first matching pattern names.
    pub fn device_of(&self, name: &str) -> Option<Device> {
        self.compiled.iter().zip(&self.rules).find(|(r, _)| r.is_match(name)).map(|(_, (_, d))| *d)
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A routed-expert stack (`blk.N.ffn_{up,down,gate,gate_up}_{,ch}exps.*`):
/// what llama.cpp's `--n-cpu-moe` / `--cpu-moe` override to the CPU buffer
/// type (`llm_ffn_exps_block_regex`, "blk\\.%d\\.ffn_(up|down|gate|gate_up)_(ch|)exps",
/// common/common.h; the flags in common/arg.cpp). Shared experts
/// (`_shexp`) and the router (`ffn_gate_inp`) stay with their layer.
pub fn is_routed_expert(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')).map(|(_, r)| r) else {
        return false;
    };
    ["ffn_up_", "ffn_down_", "ffn_gate_", "ffn_gate_up_"]
        .iter()
        .any(|p| rest.strip_prefix(p).is_some_and(|r| r.starts_with("exps.") || r.starts_with("chexps.")))
}

impl Placement {
    /// The device of one tensor: its slot's, except a routed-expert stack
    /// of a layer below `host_expert_layers`, which stays on the host.
    pub fn tensor_device(&self, t: &TensorInfo) -> Device {
        if let Some(d) = self.overrides.device_of(&t.name) {
            return d;
        }
        match t.slot {
            Slot::Layer(il) if il < self.host_expert_layers && is_routed_expert(&t.name) => Device::Cpu,
            slot => self.slot_device(slot),
        }
    }

    pub fn slot_device(&self, slot: Slot) -> Device {
        match slot {
            Slot::Input => Device::Cpu,
            Slot::Layer(il) => self.layers.get(il as usize).copied().unwrap_or(self.output),
            Slot::Output => self.output,
        }
    }

    /// Layers on each GPU, for display: `[(gpu, first, last)]`.
    pub fn ranges(&self) -> Vec<(Device, u32, u32)> {
        let mut out: Vec<(Device, u32, u32)> = Vec::new();
        for (i, &d) in self.layers.iter().enumerate() {
            match out.last_mut() {
                Some(last) if last.0 == d => last.2 = i as u32,
                _ => out.push((d, i as u32, i as u32)),
            }
        }
        out
    }
}

/// Normalised cumulative split points from `--tensor-split` weights.
pub fn split_points(weights: &[f64]) -> Result<Vec<f64>, CoreError> {
    if weights.is_empty() {
        return Err(CoreError::invalid("tensor-split", "no GPUs"));
    }
    if weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
        return Err(CoreError::invalid("tensor-split", "shares must be finite and non-negative"));
    }
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return Err(CoreError::invalid("tensor-split", "at least one share must be positive"));
    }
    let mut acc = 0.0;
    Ok(weights
        .iter()
        .map(|w| {
            acc += w;
            acc / total
        })
        .collect())
}

/// Assign slots to devices as llama.cpp does for `-ngl n_gpu_layers` over
/// GPUs with `split` shares (one per GPU; empty = no GPU).
pub fn place(n_layer: u32, n_gpu_layers: u64, split: &[f64], order: OffloadOrder) -> Result<Placement, CoreError> {
    let slots = n_layer as i64 + 1;
    let ngl = n_gpu_layers.min(i64::MAX as u64) as i64;
    let act = if split.is_empty() { 0 } else { ngl.min(slots) };
    let start = match order {
        OffloadOrder::OutputFirst => (slots - ngl).max(0),
        OffloadOrder::OutputLast => (n_layer as i64 - ngl).max(0),
    };
    let points = if split.is_empty() { Vec::new() } else { split_points(split)? };
    let dev = |il: i64| -> Device {
        if act == 0 || il < start || il - start >= act {
            return Device::Cpu;
        }
        let x = (il - start) as f64 / act as f64;
        // std::upper_bound: first split point strictly greater than x
        let idx = points.iter().position(|&p| p > x).unwrap_or(points.len() - 1);
        Device::Gpu(idx as u32)
    };
    let layers: Vec<Device> = (0..n_layer as i64).map(dev).collect();
    let output = dev(n_layer as i64);
    let offloaded = layers.iter().filter(|d| **d != Device::Cpu).count() as u32 + u32::from(output != Device::Cpu);
    let rule = match order {
        OffloadOrder::OutputFirst => "i_gpu_start = max(n_layer + 1 − ngl, 0); slots i_gpu_start..=n_layer (the output layer is slot n_layer, so it goes first)",
        OffloadOrder::OutputLast => "i_gpu_start = max(n_layer − ngl, 0); the output layer only when ngl > n_layer",
    };
    let explain = Explanation::new(format!(
        "{rule}; GPU of slot il = first GPU whose cumulative --tensor-split share > (il − i_gpu_start) / min(ngl, n_layer + 1); token embeddings stay on the host"
    ))
    .term("n_layer", n_layer)
    .term("ngl", n_gpu_layers)
    .term("tensor split (cumulative)", format!("{points:?}"))
    .note("llama.cpp src/llama-model.cpp load_tensors (get_layer_buft_list); output-first order since PR #18148");
    Ok(Placement { layers, output, offloaded, host_expert_layers: 0, overrides: TensorOverrides::default(), explain })
}

/// Bytes a tensor takes in a device's model buffer.
pub fn alloc_size(ty: GgmlType, ne: &[u64], bytes: u64, device: Device) -> Result<u64, CoreError> {
    match device {
        Device::Cpu => {
            bytes.checked_next_multiple_of(CPU_ALIGNMENT).ok_or(CoreError::Overflow { what: "tensor".into() })
        }
        Device::Gpu(_) => {
            let mut size = bytes;
            let ne0 = ne.first().copied().unwrap_or(0);
            if ty.is_quantized() && ne0 % MATRIX_ROW_PADDING != 0 {
                let pad = ty.row_size(MATRIX_ROW_PADDING - ne0 % MATRIX_ROW_PADDING).unwrap_or(0);
                size = add("tensor padding", size, pad)?;
            }
            size.checked_next_multiple_of(CUDA_ALIGNMENT).ok_or(CoreError::Overflow { what: "tensor".into() })
        }
    }
}

/// Whether llama.cpp loads a host weight into the CPU's repack buffer
/// (`CPU_REPACK`, `CPU_AARCH64` before mid-2025) on an x86-64 AVX2 host:
/// ggml-cpu `repack.cpp` `ggml_repack_get_optimal_repack_type` repacks
/// Q4_0, Q4_K, IQ4_NL and MXFP4 matrices whose row count is a multiple of 8
/// (8×8 interleave), for `MUL_MAT` (2D) and `MUL_MAT_ID` (3D expert stacks);
/// the token embedding feeds `GET_ROWS` and is never repacked. AVX-512
/// hosts also repack Q2_K, ARM hosts other sets (Q4_0/Q4_K/Q5_K/Q6_K/Q8_0/
/// IQ4_NL/MXFP4 with NEON dot-product or i8mm): vramfit assumes AVX2.
pub fn cpu_repacked(t: &TensorInfo) -> bool {
    repackable_matrix(t) && t.slot != Slot::Input
}

/// The type and shape `ggml_repack_get_optimal_repack_type` repacks, for
/// whichever op reads the tensor.
fn repackable_matrix(t: &TensorInfo) -> bool {
    let kind = matches!(t.ty, GgmlType::Q4_0 | GgmlType::Q4K | GgmlType::Iq4Nl | GgmlType::Mxfp4);
    let matrix = t.ne.len() == 2 || (t.ne.len() == 3 && t.name.contains("_exps"));
    kind && matrix && t.ne.get(1).is_some_and(|r| r % 8 == 0)
}

/// The buffer type of a model buffer, as llama.cpp names it in its log
/// (`load_tensors: CUDA0 model buffer size = …`); serialized as that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BufferType {
    /// a GPU's own memory (`CUDA0`, `CUDA1`, …)
    Cuda(u32),
    /// host tensors read through mmap: one mapped file range
    CpuMapped,
    /// host tensors copied into memory (`--no-mmap`)
    Cpu,
    /// host matrices the CPU backend repacks (`CPU_AARCH64` before mid-2025)
    CpuRepack,
}

impl std::fmt::Display for BufferType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BufferType::Cuda(g) => write!(f, "CUDA{g}"),
            BufferType::CpuMapped => f.write_str("CPU_Mapped"),
            BufferType::Cpu => f.write_str("CPU"),
            BufferType::CpuRepack => f.write_str("CPU_REPACK"),
        }
    }
}

impl std::str::FromStr for BufferType {
    type Err = String;
    fn from_str(s: &str) -> Result<BufferType, String> {
        match s {
            "CPU_Mapped" => Ok(BufferType::CpuMapped),
            "CPU" => Ok(BufferType::Cpu),
            "CPU_REPACK" => Ok(BufferType::CpuRepack),
            _ => s.strip_prefix("CUDA").and_then(|n| n.parse().ok()).map(BufferType::Cuda).ok_or_else(|| {
                format!("'{s}' is not a llama.cpp model buffer type (CUDA<n>, CPU_Mapped, CPU, CPU_REPACK)")
            }),
        }
    }
}

impl Serialize for BufferType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BufferType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BufferType, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// One device's model buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelBuffer {
    pub device: Device,
    /// llama.cpp's buffer type (its name in the log)
    pub name: BufferType,
    pub bytes: u64,
    pub tensors: u64,
    /// bytes of tensors actually used on this device (for `CPU_Mapped`, the
    /// span may include other devices' tensors lying in between)
    pub used_bytes: u64,
    pub explain: Explanation,
}

/// The GPUs a slot or an `-ot` rule names, in order.
fn placed_gpus(placement: &Placement) -> Vec<u32> {
    let mut gpus: Vec<u32> = placement
        .layers
        .iter()
        .chain(std::iter::once(&placement.output))
        .chain(placement.overrides.rules.iter().map(|(_, d)| d))
        .filter_map(|d| match d {
            Device::Gpu(g) => Some(*g),
            Device::Cpu => None,
        })
        .collect();
    gpus.sort_unstable();
    gpus.dedup();
    gpus
}

/// The host tensors split into those the CPU repacks (`CPU_REPACK`) and the
/// rest (mapped or copied).
fn host_split<'m>(
    model: &'m LlamaModel,
    placement: &Placement,
    on_host: Vec<&'m TensorInfo>,
    cpu_repack: bool,
) -> (Vec<&'m TensorInfo>, Vec<&'m TensorInfo>) {
    let (mut repacked, host): (Vec<&TensorInfo>, Vec<&TensorInfo>) =
        on_host.into_iter().partition(|t| cpu_repack && cpu_repacked(t));
    // a tied output head on the host: the loader creates token_embd a second
    // time for the output layer (TENSOR_DUPLICATED, e.g.
    // llama_model_qwen3::load_arch_tensors, src/models/qwen3.cpp) with the
    // output's buffer list, whose CPU extra buffer type (repack) takes the
    // MUL_MAT: a repacked copy beside the mapped original, which keeps
    // serving GET_ROWS. Measured on b11312: Qwen3-0.6B all-Q4_0 logs
    // `CPU_REPACK model buffer size = 319.71 MiB` with the 83.47 MiB head in
    // it (calibration/data/measured/llamacpp-cpu.jsonl).
    if cpu_repack && model.tied_output && placement.output == Device::Cpu {
        repacked.extend(model.tensors.iter().filter(|t| t.name == "token_embd.weight" && repackable_matrix(t)));
    }
    (repacked, host)
}

/// Model buffers of every device that holds weights.
pub fn model_buffers(
    model: &LlamaModel,
    placement: &Placement,
    mmap: bool,
    cpu_repack: bool,
) -> Result<Vec<ModelBuffer>, CoreError> {
    let mut out: Vec<ModelBuffer> = Vec::new();
    for g in placed_gpus(placement) {
        let dev = Device::Gpu(g);
        let mut bytes = 0u64;
        let mut used = 0u64;
        let mut n = 0u64;
        let mut padded = 0u64;
        for t in &model.tensors {
            if placement.tensor_device(t) != dev {
                continue;
            }
            let a = alloc_size(t.ty, &t.ne, t.bytes, dev)?;
            padded = add("padding", padded, a - t.bytes)?;
            bytes = add("model buffer", bytes, a)?;
            used = add("model buffer", used, t.bytes)?;
            n += 1;
        }
        // a tied output head is loaded again into the output slot
        if model.tied_output && placement.output == dev {
            if let Some(t) = model.tensors.iter().find(|t| t.slot == Slot::Input && t.name == "token_embd.weight") {
                let a = alloc_size(t.ty, &t.ne, t.bytes, dev)?;
                bytes = add("model buffer", bytes, a)?;
                used = add("model buffer", used, t.bytes)?;
                n += 1;
            }
        }
        if n == 0 {
            continue; // an -ot target that no tensor reached
        }
        out.push(ModelBuffer {
            device: dev,
            name: BufferType::Cuda(g),
            bytes,
            tensors: n,
            used_bytes: used,
            explain: Explanation::new(
                "Σ over this GPU's tensors of pad(nbytes + row padding, 128 B); row padding: a quantized tensor whose ne0 is not a multiple of 512 gets the bytes of the missing elements",
            )
            .term("tensors", n)
            .term("tensor bytes", used)
            .term("alignment and row padding", padded)
            .note("ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alloc_size / get_alignment"),
        });
    }
    // host: the input layer plus every slot left on the CPU; matrices the
    // CPU repacks are copied into their own buffer, the rest stay mapped
    let on_host: Vec<_> = model.tensors.iter().filter(|t| placement.tensor_device(t) == Device::Cpu).collect();
    let (repacked, host) = host_split(model, placement, on_host, cpu_repack);
    if !repacked.is_empty() {
        let mut bytes = 0u64;
        for t in &repacked {
            bytes = add("repack buffer", bytes, alloc_size(t.ty, &t.ne, t.bytes, Device::Cpu)?)?;
        }
        let used = sum("repacked weights", &repacked.iter().map(|t| t.bytes).collect::<Vec<_>>())?;
        out.push(ModelBuffer {
            device: Device::Cpu,
            name: BufferType::CpuRepack,
            bytes,
            tensors: repacked.len() as u64,
            used_bytes: used,
            explain: Explanation::new("Σ pad(nbytes, 32 B) of the host matrices the CPU backend repacks (Q4_0, Q4_K, IQ4_NL, MXFP4 with rows % 8 = 0 on x86-64 AVX2)")
                .term("tensors", repacked.len())
                .term("tensor bytes", used)
                .note("ggml-cpu repack.cpp ggml_repack_get_optimal_repack_type; llama.cpp logs it as CPU_REPACK (CPU_AARCH64 before mid-2025); --no-repack turns it off; a GPU never takes over ops reading these weights"),
        });
    }
    if !host.is_empty() {
        let used = sum("host weights", &host.iter().map(|t| t.bytes).collect::<Vec<_>>())?;
        if mmap {
            let first = host.iter().map(|t| t.offset).min().unwrap_or(0);
            let last = host.iter().map(|t| t.offset.saturating_add(t.bytes)).max().unwrap_or(0);
            let span = last.saturating_sub(first);
            out.push(ModelBuffer {
                device: Device::Cpu,
                name: BufferType::CpuMapped,
                bytes: span,
                tensors: host.len() as u64,
                used_bytes: used,
                explain: Explanation::new("last byte − first byte of the host tensors in the file (one mmap range)")
                    .term("first offset", first)
                    .term("end", last)
                    .term("host tensor bytes", used)
                    .note(if span > used {
                        "the mapped range includes other devices' tensors lying between host tensors in the file; only the host tensors' pages stay resident"
                    } else {
                        "llama_model_loader::get_mapping_range"
                    }),
            });
        } else {
            let mut bytes = 0u64;
            for t in &host {
                bytes = add("host buffer", bytes, alloc_size(t.ty, &t.ne, t.bytes, Device::Cpu)?)?;
            }
            out.push(ModelBuffer {
                device: Device::Cpu,
                name: BufferType::Cpu,
                bytes,
                tensors: host.len() as u64,
                used_bytes: used,
                explain: Explanation::new("Σ pad(nbytes, 32 B) of the host tensors (--no-mmap copies them)")
                    .term("host tensor bytes", used),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_first_offload_order() {
        // 4 layers, -ngl 1: only the output layer goes to the GPU
        let p = place(4, 1, &[1.0], OffloadOrder::OutputFirst).unwrap();
        assert_eq!(p.layers, vec![Device::Cpu; 4]);
        assert_eq!(p.output, Device::Gpu(0));
        // -ngl 3: output + the last two layers
        let p = place(4, 3, &[1.0], OffloadOrder::OutputFirst).unwrap();
        assert_eq!(p.layers, vec![Device::Cpu, Device::Cpu, Device::Gpu(0), Device::Gpu(0)]);
        assert_eq!(p.offloaded, 3);
        // the old order keeps the output on the host until -ngl 5
        let p = place(4, 4, &[1.0], OffloadOrder::OutputLast).unwrap();
        assert_eq!(p.layers, vec![Device::Gpu(0); 4]);
        assert_eq!(p.output, Device::Cpu);
        let p = place(4, 99, &[1.0], OffloadOrder::OutputLast).unwrap();
        assert_eq!(p.output, Device::Gpu(0));
    }

    #[test]
    fn tensor_split_uses_upper_bound() {
        // 32 layers + output = 33 slots over 1:1 → x = il/33; GPU0 while x < 0.5 → il 0..=16
        let p = place(32, 99, &[1.0, 1.0], OffloadOrder::OutputFirst).unwrap();
        assert_eq!(p.layers.iter().filter(|d| **d == Device::Gpu(0)).count(), 17);
        assert_eq!(p.output, Device::Gpu(1));
        // no GPU: everything on the host whatever -ngl says
        let p = place(32, 99, &[], OffloadOrder::OutputFirst).unwrap();
        assert_eq!(p.offloaded, 0);
        assert!(split_points(&[0.0, 0.0]).is_err());
        assert!(split_points(&[f64::NAN]).is_err());
    }

    #[test]
    fn cuda_pads_quantized_rows() {
        // ne0 = 2880 (gpt-oss): 2880 % 512 = 320 → 192 missing elements = 6 MXFP4 blocks = 102 B
        let bytes = GgmlType::Mxfp4.nbytes(&[2880, 2880]).unwrap();
        let a = alloc_size(GgmlType::Mxfp4, &[2880, 2880], bytes, Device::Gpu(0)).unwrap();
        assert_eq!(a, (bytes + 102).next_multiple_of(128));
        // f16 is not padded
        assert_eq!(alloc_size(GgmlType::F16, &[2880, 2], 2880 * 4, Device::Gpu(0)).unwrap(), 11520);
    }
}
