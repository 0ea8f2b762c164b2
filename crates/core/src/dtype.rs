//! Element types and their storage size.

use crate::error::CoreError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Storage type of a tensor. Sub-byte types are counted in bits.
///
/// Reports write a dtype with [`DType::name`] (`fp16`); the serde form
/// (`f16`) is only used by debug snapshots of model specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    BF16,
    /// 8-bit float (e4m3 or e5m2: same size).
    F8,
    I8,
    I4,
}

impl DType {
    pub const ALL: [DType; 6] = [DType::F32, DType::F16, DType::BF16, DType::F8, DType::I8, DType::I4];

    /// Bits per element.
    pub fn bits(self) -> u64 {
        match self {
            DType::F32 => 32,
            DType::F16 | DType::BF16 => 16,
            DType::F8 | DType::I8 => 8,
            DType::I4 => 4,
        }
    }

    /// Bytes per element of a whole-byte type. A sub-byte type (int4) has no
    /// whole-byte size: it is an error here, and its storage is counted in
    /// bits by [`DType::bytes_for`] (packed) or by its quantization format.
    pub fn bytes(self) -> Result<u64, CoreError> {
        match self.bits() {
            b if b % 8 == 0 => Ok(b / 8),
            b => Err(CoreError::invalid(
                "dtype",
                format!(
                    "{self} is {b} bits per element: it has no whole-byte size (packed storage is counted in bits)"
                ),
            )),
        }
    }

    /// Bytes per element as a real number (int4: 0.5), for rates and the time model.
    pub fn bytes_f64(self) -> f64 {
        self.bits() as f64 / 8.0
    }

    /// Bytes for `n` elements, rounded up to whole bytes.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        crate::units::mul_div_ceil("elements", n, self.bits(), 8).ok()
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "fp32",
            DType::F16 => "fp16",
            DType::BF16 => "bf16",
            DType::F8 => "fp8",
            DType::I8 => "int8",
            DType::I4 => "int4",
        }
    }

    /// Is this a floating type a kernel can compute in directly?
    pub fn is_compute_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "fp32" | "f32" | "float32" | "float" | "torch.float32" => DType::F32,
            "fp16" | "f16" | "float16" | "half" | "torch.float16" => DType::F16,
            "bf16" | "bfloat16" | "torch.bfloat16" => DType::BF16,
            "fp8" | "f8" | "float8" | "e4m3" | "e5m2" | "f8_e4m3" | "f8_e5m2" | "float8_e4m3fn" => DType::F8,
            "int8" | "i8" | "u8" | "uint8" => DType::I8,
            "int4" | "i4" | "q4" => DType::I4,
            other => return Err(format!("unknown dtype '{other}': expected one of fp32, fp16, bf16, fp8, int8, int4")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_bytes_or_an_error() {
        assert_eq!(DType::BF16.bytes().unwrap(), 2);
        assert_eq!(DType::F32.bytes().unwrap(), 4);
        assert_eq!(DType::F8.bytes().unwrap(), 1);
        // int4 used to come out as 4 / 8 = 0 bytes
        assert!(DType::I4.bytes().is_err());
        assert_eq!(DType::I4.bytes_f64(), 0.5);
        assert_eq!(DType::I4.bytes_for(3), Some(2));
        assert_eq!(DType::I4.bytes_for(u64::MAX), Some(u64::MAX / 2 + 1));
    }
}
