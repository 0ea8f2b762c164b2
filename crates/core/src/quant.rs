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
}

/// bitsandbytes 4-bit block size (`blocksize=64` in `quantize_4bit`).
pub const BNB4_BLOCK: u64 = 64;
/// bitsandbytes nested quantization groups 256 absmax values per fp32 scale.
pub const BNB4_NESTED_BLOCK: u64 = 256;

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
        }
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

    /// Bytes of one quantized `d_out × d_in` weight matrix (no bias), with
    /// the formula in words.
    pub fn matrix_bytes(&self, d_in: u64, d_out: u64) -> Result<(u64, &'static str), CoreError> {
        let n = product("quantized weight", &[d_in, d_out])?;
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
