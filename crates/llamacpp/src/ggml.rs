//! ggml tensor types: id, name, elements per block and bytes per block.
//!
//! Source: llama.cpp `gguf-py/gguf/constants.py` (`GGML_QUANT_SIZES`, the
//! Python mirror of `type_traits[]` in `ggml/src/ggml.c`), read at
//! ggml-org/llama.cpp commit 0024aa7417efd50a7c2a79e049dfbbbceb0beaaf, and
//! `enum ggml_type` in `ggml/include/ggml.h`. Ids 4, 5 (Q4_2/Q4_3) and
//! 31–33, 36–38 (the removed Q4_0_x_y / IQ4_NL_x_y repacks) are retired:
//! GGUF files may not use them and llama.cpp refuses them, so do we.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One ggml tensor type, as stored in a GGUF tensor info (`ggml_type` id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
    Iq2Xxs,
    Iq2Xs,
    Iq3Xxs,
    Iq1S,
    Iq4Nl,
    Iq3S,
    Iq2S,
    Iq4Xs,
    I8,
    I16,
    I32,
    I64,
    F64,
    Iq1M,
    Bf16,
    Tq1_0,
    Tq2_0,
    Mxfp4,
    Nvfp4,
    Q1_0,
}

/// `QK_K`: elements per super-block of the K-quants and most IQ types.
const QK_K: u64 = 256;

impl GgmlType {
    /// Every type a current GGUF may use, in id order.
    pub const ALL: [GgmlType; 34] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q8K,
        GgmlType::Iq2Xxs,
        GgmlType::Iq2Xs,
        GgmlType::Iq3Xxs,
        GgmlType::Iq1S,
        GgmlType::Iq4Nl,
        GgmlType::Iq3S,
        GgmlType::Iq2S,
        GgmlType::Iq4Xs,
        GgmlType::I8,
        GgmlType::I16,
        GgmlType::I32,
        GgmlType::I64,
        GgmlType::F64,
        GgmlType::Iq1M,
        GgmlType::Bf16,
        GgmlType::Tq1_0,
        GgmlType::Tq2_0,
        GgmlType::Mxfp4,
        GgmlType::Nvfp4,
        GgmlType::Q1_0,
    ];

    /// The `ggml_type` id written in GGUF tensor infos.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q8_1 => 9,
            GgmlType::Q2K => 10,
            GgmlType::Q3K => 11,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::Q8K => 15,
            GgmlType::Iq2Xxs => 16,
            GgmlType::Iq2Xs => 17,
            GgmlType::Iq3Xxs => 18,
            GgmlType::Iq1S => 19,
            GgmlType::Iq4Nl => 20,
            GgmlType::Iq3S => 21,
            GgmlType::Iq2S => 22,
            GgmlType::Iq4Xs => 23,
            GgmlType::I8 => 24,
            GgmlType::I16 => 25,
            GgmlType::I32 => 26,
            GgmlType::I64 => 27,
            GgmlType::F64 => 28,
            GgmlType::Iq1M => 29,
            GgmlType::Bf16 => 30,
            GgmlType::Tq1_0 => 34,
            GgmlType::Tq2_0 => 35,
            GgmlType::Mxfp4 => 39,
            GgmlType::Nvfp4 => 40,
            GgmlType::Q1_0 => 41,
        }
    }

    /// The type with this id; `None` for unknown and retired ids.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| t.id() == id)
    }

    /// Why an id is not accepted (for error messages).
    pub fn unknown_id_reason(id: u32) -> &'static str {
        match id {
            4 | 5 => "Q4_2/Q4_3 were removed from ggml in 2023",
            31..=33 => "Q4_0_4_4/Q4_0_4_8/Q4_0_8_8 were removed from GGUF files (llama.cpp repacks Q4_0 at load)",
            36..=38 => "IQ4_NL_4_4/_4_8/_8_8 were removed from GGUF files (llama.cpp repacks IQ4_NL at load)",
            _ => "not a ggml type id this version knows (newest known: 41 = Q1_0)",
        }
    }

    /// Lower-case name as llama.cpp prints it (`q4_K`, `iq2_xxs`, `mxfp4`).
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q8_1 => "q8_1",
            GgmlType::Q2K => "q2_K",
            GgmlType::Q3K => "q3_K",
            GgmlType::Q4K => "q4_K",
            GgmlType::Q5K => "q5_K",
            GgmlType::Q6K => "q6_K",
            GgmlType::Q8K => "q8_K",
            GgmlType::Iq2Xxs => "iq2_xxs",
            GgmlType::Iq2Xs => "iq2_xs",
            GgmlType::Iq3Xxs => "iq3_xxs",
            GgmlType::Iq1S => "iq1_s",
            GgmlType::Iq4Nl => "iq4_nl",
            GgmlType::Iq3S => "iq3_s",
            GgmlType::Iq2S => "iq2_s",
            GgmlType::Iq4Xs => "iq4_xs",
            GgmlType::I8 => "i8",
            GgmlType::I16 => "i16",
            GgmlType::I32 => "i32",
            GgmlType::I64 => "i64",
            GgmlType::F64 => "f64",
            GgmlType::Iq1M => "iq1_m",
            GgmlType::Bf16 => "bf16",
            GgmlType::Tq1_0 => "tq1_0",
            GgmlType::Tq2_0 => "tq2_0",
            GgmlType::Mxfp4 => "mxfp4",
            GgmlType::Nvfp4 => "nvfp4",
            GgmlType::Q1_0 => "q1_0",
        }
    }

    /// Elements per block (`blck_size`).
    pub fn block_size(self) -> u64 {
        match self {
            GgmlType::F32
            | GgmlType::F16
            | GgmlType::Bf16
            | GgmlType::I8
            | GgmlType::I16
            | GgmlType::I32
            | GgmlType::I64
            | GgmlType::F64 => 1,
            GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q8_1
            | GgmlType::Iq4Nl
            | GgmlType::Mxfp4 => 32,
            GgmlType::Nvfp4 => 64,
            GgmlType::Q1_0 => 128,
            GgmlType::Q2K
            | GgmlType::Q3K
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
            | GgmlType::Q8K
            | GgmlType::Iq2Xxs
            | GgmlType::Iq2Xs
            | GgmlType::Iq3Xxs
            | GgmlType::Iq1S
            | GgmlType::Iq3S
            | GgmlType::Iq2S
            | GgmlType::Iq4Xs
            | GgmlType::Iq1M
            | GgmlType::Tq1_0
            | GgmlType::Tq2_0 => QK_K,
        }
    }

    /// Bytes per block (`type_size`), as `GGML_QUANT_SIZES` spells them out.
    pub fn type_size(self) -> u64 {
        match self {
            GgmlType::F32 | GgmlType::I32 => 4,
            GgmlType::F16 | GgmlType::Bf16 | GgmlType::I16 => 2,
            GgmlType::I8 => 1,
            GgmlType::I64 | GgmlType::F64 => 8,
            GgmlType::Q4_0 => 2 + 16,
            GgmlType::Q4_1 => 2 + 2 + 16,
            GgmlType::Q5_0 => 2 + 4 + 16,
            GgmlType::Q5_1 => 2 + 2 + 4 + 16,
            GgmlType::Q8_0 => 2 + 32,
            GgmlType::Q8_1 => 4 + 4 + 32,
            GgmlType::Q2K => 2 + 2 + QK_K / 16 + QK_K / 4,
            GgmlType::Q3K => 2 + QK_K / 4 + QK_K / 8 + 12,
            GgmlType::Q4K => 2 + 2 + QK_K / 2 + 12,
            GgmlType::Q5K => 2 + 2 + QK_K / 2 + QK_K / 8 + 12,
            GgmlType::Q6K => 2 + QK_K / 2 + QK_K / 4 + QK_K / 16,
            GgmlType::Q8K => 4 + QK_K + QK_K / 8,
            GgmlType::Iq2Xxs => 2 + QK_K / 4,
            GgmlType::Iq2Xs => 2 + QK_K / 4 + QK_K / 32,
            GgmlType::Iq3Xxs => 2 + QK_K / 4 + QK_K / 8,
            GgmlType::Iq1S => 2 + QK_K / 8 + QK_K / 16,
            GgmlType::Iq4Nl => 2 + 16,
            GgmlType::Iq3S => 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4,
            GgmlType::Iq2S => 2 + QK_K / 4 + QK_K / 16,
            GgmlType::Iq4Xs => 2 + 2 + QK_K / 2 + QK_K / 64,
            GgmlType::Iq1M => QK_K / 8 + QK_K / 16 + QK_K / 32,
            GgmlType::Tq1_0 => 2 + 4 * 13,
            GgmlType::Tq2_0 => 2 + 64,
            GgmlType::Mxfp4 => 1 + 16,
            GgmlType::Nvfp4 => 4 + 32,
            GgmlType::Q1_0 => 2 + 16,
        }
    }

    /// Quantized (block size > 1): CUDA pads the last row of these (see
    /// [`crate::placement`]).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes of one row of `ne0` elements (`ggml_row_size`); `None` when
    /// `ne0` is not a whole number of blocks (ggml refuses such tensors) or
    /// the product overflows.
    pub fn row_size(self, ne0: u64) -> Option<u64> {
        let bs = self.block_size();
        if !ne0.is_multiple_of(bs) {
            return None;
        }
        (ne0 / bs).checked_mul(self.type_size())
    }

    /// Bytes of a whole tensor of shape `ne` (`ggml_nbytes` of a contiguous tensor).
    pub fn nbytes(self, ne: &[u64]) -> Option<u64> {
        let (first, rest) = ne.split_first()?;
        let row = self.row_size(*first)?;
        rest.iter().try_fold(row, |acc, &d| acc.checked_mul(d))
    }

    /// Bits per weight, for display (`type_size × 8 / block_size`).
    pub fn bits_per_weight(self) -> f64 {
        self.type_size() as f64 * 8.0 / self.block_size() as f64
    }

    /// The KV-cache types `--cache-type-k/-v` accepts (llama.cpp
    /// `common/arg.cpp` `kv_cache_types`): f32, f16, bf16, q8_0, q4_0, q4_1,
    /// iq4_nl, q5_0, q5_1.
    pub const CACHE_TYPES: [GgmlType; 9] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Bf16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Iq4Nl,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
    ];

    /// Parse a `--cache-type-k/-v` value.
    pub fn parse_cache_type(s: &str) -> Result<GgmlType, String> {
        let lower = s.to_ascii_lowercase();
        GgmlType::CACHE_TYPES.iter().copied().find(|t| t.name() == lower).ok_or_else(|| {
            let names: Vec<&str> = GgmlType::CACHE_TYPES.iter().map(|t| t.name()).collect();
            format!("unknown cache type '{s}': llama.cpp accepts {}", names.join(", "))
        })
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_retired_ids_are_refused() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        for retired in [4, 5, 31, 32, 33, 36, 37, 38, 42, u32::MAX] {
            assert_eq!(GgmlType::from_id(retired), None, "{retired}");
        }
    }

    #[test]
    fn block_sizes_match_the_c_structs() {
        // sizeof(block_q4_K) = 2·2 (d, dmin) + 12 scales + 128 quants = 144
        assert_eq!(GgmlType::Q4K.type_size(), 144);
        assert_eq!(GgmlType::Q6K.type_size(), 210);
        assert_eq!(GgmlType::Q3K.type_size(), 110);
        assert_eq!(GgmlType::Q2K.type_size(), 84);
        assert_eq!(GgmlType::Q5K.type_size(), 176);
        assert_eq!(GgmlType::Q8K.type_size(), 292);
        assert_eq!(GgmlType::Iq4Xs.type_size(), 136);
        assert_eq!(GgmlType::Iq2Xxs.type_size(), 66);
        assert_eq!(GgmlType::Iq1M.type_size(), 56);
        assert_eq!(GgmlType::Mxfp4.type_size(), 17);
        assert_eq!(GgmlType::Nvfp4.type_size(), 36);
        // Q4_K_M's 4.5 bits per weight
        assert!((GgmlType::Q4K.bits_per_weight() - 4.5).abs() < 1e-12);
    }

    #[test]
    fn row_size_needs_whole_blocks() {
        assert_eq!(GgmlType::Q4_0.row_size(4096), Some(4096 / 32 * 18));
        assert_eq!(GgmlType::Q4K.row_size(100), None);
        assert_eq!(GgmlType::F16.nbytes(&[4096, 32000]), Some(4096 * 32000 * 2));
        assert_eq!(GgmlType::F32.nbytes(&[u64::MAX, 2]), None);
    }

    #[test]
    fn cache_types_parse() {
        assert_eq!(GgmlType::parse_cache_type("q8_0"), Ok(GgmlType::Q8_0));
        assert_eq!(GgmlType::parse_cache_type("F16"), Ok(GgmlType::F16));
        assert!(GgmlType::parse_cache_type("q4_K").unwrap_err().contains("q8_0"));
    }
}
