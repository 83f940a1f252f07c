//! The ggml tensor types: their ids, names and block geometry.
//!
//! Every type ggml has ever assigned a live id to is listed, so that a file using a type we
//! cannot compute with still parses (and `dllm inspect` shows it); only dequantization and the
//! model loader refuse such types, naming them.

use std::fmt;

/// A ggml tensor element type, as stored in a GGUF tensor-info record.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
}

/// (type, ggml id, values per block, bytes per block).
const TABLE: &[(GgmlType, u32, usize, usize)] = &[
    (GgmlType::F32, 0, 1, 4),
    (GgmlType::F16, 1, 1, 2),
    (GgmlType::Q4_0, 2, 32, 18),
    (GgmlType::Q4_1, 3, 32, 20),
    (GgmlType::Q5_0, 6, 32, 22),
    (GgmlType::Q5_1, 7, 32, 24),
    (GgmlType::Q8_0, 8, 32, 34),
    (GgmlType::Q8_1, 9, 32, 36),
    (GgmlType::Q2_K, 10, 256, 84),
    (GgmlType::Q3_K, 11, 256, 110),
    (GgmlType::Q4_K, 12, 256, 144),
    (GgmlType::Q5_K, 13, 256, 176),
    (GgmlType::Q6_K, 14, 256, 210),
    (GgmlType::Q8_K, 15, 256, 292),
    (GgmlType::IQ2_XXS, 16, 256, 66),
    (GgmlType::IQ2_XS, 17, 256, 74),
    (GgmlType::IQ3_XXS, 18, 256, 98),
    (GgmlType::IQ1_S, 19, 256, 50),
    (GgmlType::IQ4_NL, 20, 32, 18),
    (GgmlType::IQ3_S, 21, 256, 110),
    (GgmlType::IQ2_S, 22, 256, 82),
    (GgmlType::IQ4_XS, 23, 256, 136),
    (GgmlType::I8, 24, 1, 1),
    (GgmlType::I16, 25, 1, 2),
    (GgmlType::I32, 26, 1, 4),
    (GgmlType::I64, 27, 1, 8),
    (GgmlType::F64, 28, 1, 8),
    (GgmlType::IQ1_M, 29, 256, 56),
    (GgmlType::BF16, 30, 1, 2),
    (GgmlType::TQ1_0, 34, 256, 54),
    (GgmlType::TQ2_0, 35, 256, 66),
    (GgmlType::MXFP4, 39, 32, 17),
];

impl GgmlType {
    pub fn from_id(id: u32) -> Option<Self> {
        TABLE.iter().find(|e| e.1 == id).map(|e| e.0)
    }

    fn entry(self) -> &'static (GgmlType, u32, usize, usize) {
        TABLE.iter().find(|e| e.0 == self).expect("every variant is in TABLE")
    }

    pub fn id(self) -> u32 {
        self.entry().1
    }

    /// Values per block (1 for plain float and integer types).
    pub fn block_size(self) -> usize {
        self.entry().2
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        self.entry().3
    }

    /// Whether dllm can dequantize (and so compute with) this type: every weight type that
    /// gguf-py dequantizes and community GGUFs use, except the ternary TQ1_0/TQ2_0 and MXFP4.
    pub fn is_supported(self) -> bool {
        self.activations().is_some()
    }

    /// What ggml turns the activations into before a product with weights of this type (the
    /// type's `vec_dot_type` in ggml-cpu.c's `type_traits_cpu`), for the supported types.
    pub fn activations(self) -> Option<Activations> {
        use GgmlType::*;
        Some(match self {
            F32 => Activations::F32,
            F16 => Activations::F16,
            BF16 => Activations::BF16,
            Q4_0 | Q5_0 | Q8_0 | IQ4_NL => Activations::Q8_0,
            Q4_1 | Q5_1 => Activations::Q8_1,
            Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ1_S | IQ1_M | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ4_XS => {
                Activations::Q8K
            }
            _ => return None,
        })
    }

    /// Bytes taken by `n_values` values, or None when `n_values` is not a whole number of
    /// blocks or the size overflows.
    pub fn bytes_for(self, n_values: u64) -> Option<u64> {
        let bs = self.block_size() as u64;
        if !n_values.is_multiple_of(bs) {
            return None;
        }
        (n_values / bs).checked_mul(self.type_size() as u64)
    }
}

/// The form activations take in a product (ggml's `vec_dot_type`): plain f32, rounded to f16 or
/// bf16, or quantized to 8 bits per block of 32 (Q8_0; Q8_1 also keeps the block's scaled sum)
/// or of 256 (Q8_K).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activations {
    F32,
    F16,
    BF16,
    Q8_0,
    Q8_1,
    Q8K,
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        for (i, e) in TABLE.iter().enumerate() {
            assert_eq!(GgmlType::from_id(e.1), Some(e.0));
            assert!(TABLE[i + 1..].iter().all(|o| o.1 != e.1 && o.0 != e.0));
        }
        assert_eq!(GgmlType::from_id(4), None, "Q4_2 was removed from ggml");
    }

    #[test]
    fn sizes_of_whole_blocks_only() {
        assert_eq!(GgmlType::Q4_K.bytes_for(512), Some(288));
        assert_eq!(GgmlType::Q4_K.bytes_for(100), None);
        assert_eq!(GgmlType::F32.bytes_for(3), Some(12));
    }
}
