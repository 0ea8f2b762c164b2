//! Weight quantization formats and the bytes they really take, including
//! scales, zero points and index tensors, per group size.
//!
//! Which parts stay 16-bit: every format here quantizes the linear layers
//! inside the decoder blocks only. Embeddings, the output head, norms,
//! routers and biases stay in the 16-bit compute dtype (bitsandbytes skips
//! `lm_head` via `get_keys_to_not_convert`; GPTQ/AWQ/FP8 checkpoints
//! store them unquantized).

use crate::dtype::DType;
use crate::error::CoreError;
use crate::units::{mul_div_ceil, product, sum};
use serde::{Deserialize, Serialize};

/// Quantization method of the linear weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantMethod {
    /// bitsandbytes 4-bit (NF4 or FP4): blocks of 64, an absmax per block;
    /// double quantization stores the absmax in 8 bits with an fp32 scale per 256 blocks.
    Bnb4,
    /// bitsandbytes LLM.int8(): int8 weights, one fp32 scale per output row (SCB).
    Bnb8,
    /// GPTQ: packed `bits` weights, fp16 scales and packed zeros per group, int32 `g_idx` per input row.
    Gptq,
    /// AWQ: packed `bits` weights, fp16 scales and packed zeros per group.
    Awq,
    /// FP8 (e4m3): 1 byte per weight, fp32 scales per block (or one per tensor).
    Fp8,
    /// Generic weight-only integer quantization with fp16 scales and zeros per group
    /// (what `--dtype int4` / `--dtype int8` mean for an unquantized checkpoint).
    Int,
    /// OCP Microscaling MXFP4 (gpt-oss): e2m1 values packed two per byte
    /// (`*_blocks`) and one E8M0 byte scale per 32 values along the input
    /// (`*_scales`) — OCP MX specification v1.0 §5, gpt-oss checkpoints.
    Mxfp4,
    /// NVIDIA NVFP4 (ModelOpt `quant_algo: NVFP4`, compressed-tensors `nvfp4-pack-quantized`):
    /// e2m1 values packed two per byte, one fp8 e4m3 scale per 16 values
    /// along the input, and two fp32 scalars per matrix (weight global scale,
    /// input scale) — vLLM `ModelOptNvFp4LinearMethod.create_weights`.
    Nvfp4,
}

impl QuantMethod {
    /// The method's name as users write it.
    pub fn label(self) -> &'static str {
        match self {
            QuantMethod::Bnb4 => "bitsandbytes 4-bit",
            QuantMethod::Bnb8 => "bitsandbytes 8-bit",
            QuantMethod::Gptq => "GPTQ",
            QuantMethod::Awq => "AWQ",
            QuantMethod::Fp8 => "FP8",
            QuantMethod::Int => "integer",
            QuantMethod::Mxfp4 => "MXFP4",
            QuantMethod::Nvfp4 => "NVFP4",
        }
    }
}

/// A quantization setup: method, bits, grouping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantSpec {
    pub method: QuantMethod,
    /// bits per quantized weight
    pub bits: u64,
    /// input features per scale group (GPTQ/AWQ/Int); None = one group per output row
    pub group_size: Option<u64>,
    /// bitsandbytes 4-bit double quantization
    pub double_quant: bool,
    /// FP8 block shape `[rows, cols]` for scales; None = one scale per tensor
    pub block: Option<(u64, u64)>,
    /// dtype of the parts that stay unquantized and of compute
    pub compute_dtype: DType,
    /// free text from the source (e.g. "nf4"), shown in output
    pub label: String,
    /// modules the checkpoint leaves unquantized, as its config names them
    /// (`modules_to_not_convert`, ModelOpt `exclude_modules`, compressed-tensors
    /// `ignore`): exact names, parent modules, or `*` wildcards
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_modules: Vec<String>,
}

/// bitsandbytes 4-bit block size (`blocksize=64` in `quantize_4bit`).
pub const BNB4_BLOCK: u64 = 64;
/// bitsandbytes nested quantization groups 256 absmax values per fp32 scale.
pub const BNB4_NESTED_BLOCK: u64 = 256;
/// MXFP4 block: 32 values share one E8M0 scale (OCP MX v1.0).
pub const MXFP4_BLOCK: u64 = 32;
/// NVFP4 block: 16 values share one fp8 e4m3 scale.
pub const NVFP4_BLOCK: u64 = 16;

impl QuantSpec {
    /// Generic weight-only int quantization (`--dtype int4|int8`).
    pub fn int(bits: u64, group_size: u64, compute: DType) -> QuantSpec {
        QuantSpec {
            method: QuantMethod::Int,
            bits,
            group_size: Some(group_size),
            double_quant: false,
            block: None,
            compute_dtype: compute,
            label: format!("int{bits} g{group_size}"),
            skip_modules: Vec::new(),
        }
    }

    /// NF4 as QLoRA uses it (double quantization on).
    pub fn nf4(double_quant: bool, compute: DType) -> QuantSpec {
        QuantSpec {
            method: QuantMethod::Bnb4,
            bits: 4,
            group_size: Some(BNB4_BLOCK),
            double_quant,
            block: None,
            compute_dtype: compute,
            label: if double_quant { "nf4 + double quant".into() } else { "nf4".into() },
            skip_modules: Vec::new(),
        }
    }

    /// FP8 with one scale per tensor (`--dtype fp8`).
    pub fn fp8_per_tensor(compute: DType) -> QuantSpec {
        QuantSpec {
            method: QuantMethod::Fp8,
            bits: 8,
            group_size: None,
            double_quant: false,
            block: None,
            compute_dtype: compute,
            label: "fp8 per-tensor scale".into(),
            skip_modules: Vec::new(),
        }
    }

    /// MXFP4 as gpt-oss stores its experts.
    pub fn mxfp4(compute: DType) -> QuantSpec {
        QuantSpec {
            method: QuantMethod::Mxfp4,
            bits: 4,
            group_size: Some(MXFP4_BLOCK),
            double_quant: false,
            block: None,
            compute_dtype: compute,
            label: "mxfp4 (e2m1, E8M0 scale per 32)".into(),
            skip_modules: Vec::new(),
        }
    }

    /// NVFP4 as ModelOpt and compressed-tensors store it.
    pub fn nvfp4(compute: DType) -> QuantSpec {
        QuantSpec {
            method: QuantMethod::Nvfp4,
            bits: 4,
            group_size: Some(NVFP4_BLOCK),
            double_quant: false,
            block: None,
            compute_dtype: compute,
            label: "nvfp4 (e2m1, fp8 scale per 16)".into(),
            skip_modules: Vec::new(),
        }
    }

    /// Does the checkpoint leave the module `name` (e.g.
    /// `model.layers.3.self_attn.q_proj`) unquantized?
    pub fn skips(&self, name: &str) -> bool {
        self.skip_modules.iter().any(|p| module_matches(p, name))
    }

    pub fn validate(&self) -> Result<(), CoreError> {
        if !(2..=8).contains(&self.bits) {
            return Err(CoreError::invalid(
                "quantization_config.bits",
                format!("{} is not between 2 and 8", self.bits),
            ));
        }
        if self.group_size == Some(0) {
            return Err(CoreError::invalid(
                "quantization_config.group_size",
                "must be positive (or -1 for per-channel)",
            ));
        }
        if let Some((r, c)) = self.block {
            if r == 0 || c == 0 {
                return Err(CoreError::invalid(
                    "quantization_config.weight_block_size",
                    "block sides must be positive",
                ));
            }
        }
        Ok(())
    }

    /// The formula of [`QuantSpec::matrix_bytes`] in words.
    pub fn formula(&self) -> &'static str {
        match self.method {
            QuantMethod::Bnb4 if self.double_quant => "n/2 + ceil(n/64)·1 B absmax + ceil(n/64/256)·4 B",
            QuantMethod::Bnb4 => "n/2 + ceil(n/64)·4 B absmax",
            QuantMethod::Bnb8 => "n·1 B + d_out·4 B row scales",
            QuantMethod::Gptq => "n·bits/8 + (d_in/g)·d_out·(2 B scale + bits/8 zero) + d_in·4 B g_idx",
            QuantMethod::Awq | QuantMethod::Int => "n·bits/8 + (d_in/g)·d_out·(2 B scale + bits/8 zero)",
            QuantMethod::Fp8 if self.block.is_some() => "n·1 B + ceil(d_out/br)·ceil(d_in/bc)·4 B block scales",
            QuantMethod::Fp8 => "n·1 B + 4 B tensor scale",
            QuantMethod::Mxfp4 => "n/2 B + d_out·ceil(d_in/32)·1 B E8M0 scales",
            QuantMethod::Nvfp4 => "n/2 B + d_out·ceil(d_in/16)·1 B fp8 scales + 2·4 B fp32 global and input scales",
        }
    }

    /// Bytes of one quantized `d_out × d_in` weight matrix (no bias), with
    /// the formula in words.
    pub fn matrix_bytes(&self, d_in: u64, d_out: u64) -> Result<(u64, &'static str), CoreError> {
        let n = product("quantized weight", &[d_in, d_out])?;
        // a group wider than the matrix's input would silently count no
        // groups at all (issue 15: `--group-size 2^64−1`)
        if let (QuantMethod::Gptq | QuantMethod::Awq | QuantMethod::Int, Some(g)) = (self.method, self.group_size) {
            if g > d_in {
                return Err(CoreError::invalid(
                    "group-size",
                    format!("{g} is larger than a quantized matrix's input dimension {d_in}: a scale group cannot span more than one row"),
                ));
            }
        }
        let packed = mul_div_ceil("quantized weight", n, self.bits, 8)?;
        match self.method {
            QuantMethod::Bnb4 => {
                let blocks = n.div_ceil(BNB4_BLOCK);
                if self.double_quant {
                    let nested = blocks.div_ceil(BNB4_NESTED_BLOCK);
                    Ok((
                        sum("bnb4", &[packed, blocks, nested * 4])?,
                        "n/2 + ceil(n/64)·1 B absmax + ceil(n/64/256)·4 B",
                    ))
                } else {
                    Ok((sum("bnb4", &[packed, blocks * 4])?, "n/2 + ceil(n/64)·4 B absmax"))
                }
            }
            QuantMethod::Bnb8 => Ok((sum("bnb8", &[n, d_out * 4])?, "n·1 B + d_out·4 B row scales")),
            QuantMethod::Gptq | QuantMethod::Awq | QuantMethod::Int => {
                let groups_per_col = match self.group_size {
                    Some(g) => d_in.div_ceil(g),
                    None => 1,
                };
                let scales = product("scales", &[groups_per_col, d_out, 2])?;
                let zeros = mul_div_ceil("zeros", groups_per_col * d_out, self.bits, 8)?;
                if self.method == QuantMethod::Gptq {
                    let g_idx = product("g_idx", &[d_in, 4])?;
                    Ok((
                        sum("gptq", &[packed, scales, zeros, g_idx])?,
                        "n·bits/8 + (d_in/g)·d_out·(2 B scale + bits/8 zero) + d_in·4 B g_idx",
                    ))
                } else {
                    Ok((sum("awq", &[packed, scales, zeros])?, "n·bits/8 + (d_in/g)·d_out·(2 B scale + bits/8 zero)"))
                }
            }
            QuantMethod::Fp8 => match self.block {
                Some((br, bc)) => {
                    let blocks = product("fp8 scales", &[d_out.div_ceil(br), d_in.div_ceil(bc), 4])?;
                    Ok((sum("fp8", &[n, blocks])?, "n·1 B + ceil(d_out/br)·ceil(d_in/bc)·4 B block scales"))
                }
                None => Ok((sum("fp8", &[n, 4])?, "n·1 B + 4 B tensor scale")),
            },
            QuantMethod::Mxfp4 => {
                let scales = product("mxfp4 scales", &[d_out, d_in.div_ceil(MXFP4_BLOCK)])?;
                Ok((sum("mxfp4", &[n.div_ceil(2), scales])?, "n/2 B + d_out·ceil(d_in/32)·1 B E8M0 scales"))
            }
            QuantMethod::Nvfp4 => {
                let scales = product("nvfp4 scales", &[d_out, d_in.div_ceil(NVFP4_BLOCK)])?;
                Ok((
                    sum("nvfp4", &[n.div_ceil(2), scales, 8])?,
                    "n/2 B + d_out·ceil(d_in/16)·1 B fp8 scales + 2·4 B fp32 global and input scales",
                ))
            }
        }
    }
}

/// Does a module pattern from a checkpoint's config name `name`? Exact
/// names, parents (`model.layers.0.self_attn` covers its `q_proj`), and `*`
/// wildcards (`model.layers.*.self_attn`, ModelOpt's `model.layers.61*`).
/// Regex entries (compressed-tensors `re:…`) match nothing here; the
/// ingest layer notes them.
pub fn module_matches(pattern: &str, name: &str) -> bool {
    if pattern.starts_with("re:") {
        return false;
    }
    if pattern.contains('*') {
        // a wildcard pattern also covers the children of what it matches
        return glob(pattern.as_bytes(), name.as_bytes())
            || name.match_indices('.').any(|(i, _)| glob(pattern.as_bytes(), &name.as_bytes()[..i]));
    }
    name == pattern || name.strip_prefix(pattern).is_some_and(|rest| rest.starts_with('.'))
}

/// `*` matches any run of characters (dots included), iteratively.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_patterns() {
        assert!(module_matches("lm_head", "lm_head"));
        assert!(module_matches("model.layers.0.self_attn", "model.layers.0.self_attn.q_proj"));
        assert!(!module_matches("model.layers.1.self_attn", "model.layers.10.self_attn.q_proj"));
        assert!(module_matches("model.layers.*.self_attn", "model.layers.7.self_attn.o_proj"));
        assert!(module_matches("model.layers.61*", "model.layers.61.mlp.experts.3.up_proj"));
        assert!(!module_matches("model.layers.61*", "model.layers.6.mlp.experts.3.up_proj"));
        assert!(!module_matches("model.layers.*.mlp.router", "model.layers.7.mlp.experts.gate_up_proj"));
        assert!(!module_matches("re:.*vision.*", "model.vision_tower.x"));
    }

    #[test]
    fn mxfp4_and_nvfp4_bytes() {
        // gpt-oss-20b gate_up_proj of one expert: 2880 in, 5760 out.
        // blocks 2880·5760/2 = 8,294,400 B; scales 5760·90 = 518,400 B
        let q = QuantSpec::mxfp4(DType::BF16);
        assert_eq!(q.matrix_bytes(2880, 5760).unwrap().0, 8_294_400 + 518_400);
        // NVFP4 of a DeepSeek expert's down_proj (2048 in, 7168 out):
        // 7,340,032 packed + 7168·128 = 917,504 fp8 scales + 8
        let q = QuantSpec::nvfp4(DType::BF16);
        assert_eq!(q.matrix_bytes(2048, 7168).unwrap().0, 7_340_032 + 917_504 + 8);
    }

    #[test]
    fn formula_is_the_one_matrix_bytes_uses() {
        let mut fp8_block = QuantSpec::fp8_per_tensor(DType::BF16);
        fp8_block.block = Some((128, 128));
        let mut gptq = QuantSpec::int(4, 128, DType::F16);
        gptq.method = QuantMethod::Gptq;
        let mut awq = QuantSpec::int(4, 128, DType::F16);
        awq.method = QuantMethod::Awq;
        let mut bnb8 = QuantSpec::nf4(false, DType::F16);
        bnb8.method = QuantMethod::Bnb8;
        for q in [
            QuantSpec::nf4(true, DType::BF16),
            QuantSpec::nf4(false, DType::BF16),
            bnb8,
            gptq,
            awq,
            QuantSpec::int(8, 64, DType::F16),
            QuantSpec::fp8_per_tensor(DType::BF16),
            fp8_block,
            QuantSpec::mxfp4(DType::BF16),
            QuantSpec::nvfp4(DType::BF16),
        ] {
            assert_eq!(q.matrix_bytes(4096, 1024).unwrap().1, q.formula(), "{:?}", q.method);
        }
    }

    #[test]
    fn a_group_wider_than_the_matrix_is_refused() {
        let q = QuantSpec::int(4, u64::MAX, DType::F16);
        let e = q.matrix_bytes(4096, 4096).unwrap_err().to_string();
        assert!(e.contains("group-size") && e.contains("4096"), "{e}");
        assert!(QuantSpec::int(4, 4096, DType::F16).matrix_bytes(4096, 4096).is_ok());
    }

    #[test]
    fn nf4_overhead_per_param() {
        // 4096×4096 = 16,777,216 weights: 8,388,608 B packed + 262,144 absmax B
        // + 1,024 blocks of nested scales · 4 B = 8,654,848 B (≈ 4.127 bits/param).
        let q = QuantSpec::nf4(true, DType::BF16);
        assert_eq!(q.matrix_bytes(4096, 4096).unwrap().0, 8_388_608 + 262_144 + 4_096);
        let q = QuantSpec::nf4(false, DType::BF16);
        assert_eq!(q.matrix_bytes(4096, 4096).unwrap().0, 8_388_608 + 1_048_576);
    }

    #[test]
    fn int4_group128() {
        // 4096 in, 4096 out, g=128: 32 groups per column.
        // packed 8,388,608 + scales 32·4096·2 = 262,144 + zeros 32·4096/2 = 65,536
        let q = QuantSpec::int(4, 128, DType::F16);
        assert_eq!(q.matrix_bytes(4096, 4096).unwrap().0, 8_388_608 + 262_144 + 65_536);
    }

    #[test]
    fn fp8_block_scales() {
        let mut q = QuantSpec::fp8_per_tensor(DType::BF16);
        q.block = Some((128, 128));
        // 7168×2048: 16·56 blocks · 4 B = 3,584
        assert_eq!(q.matrix_bytes(7168, 2048).unwrap().0, 7168 * 2048 + 16 * 56 * 4);
    }
}
