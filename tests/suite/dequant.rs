//! Dequantization is bit-exact against gguf-py's `gguf.quants.dequantize` (tests/data/dequant,
//! itself checked bit-exact against ggml's C `to_float`).

use crate::common;

use dllm::quant::{DequantError, GgmlType, dequantize};

fn read(path: &str) -> Vec<u8> {
    std::fs::read(common::data(&format!("dequant/{path}"))).unwrap()
}

#[test]
fn every_supported_type_is_bit_exact() {
    use GgmlType::*;
    for ty in [F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K] {
        let raw = read(&format!("{ty}.raw"));
        let expected: Vec<f32> =
            read(&format!("{ty}.f32")).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let mut got = vec![0f32; expected.len()];
        dequantize(ty, &raw, &mut got).unwrap();
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g.to_bits(), e.to_bits(), "{ty} value {i}: got {g}, expected {e}");
        }
    }
}

#[test]
fn unsupported_types_are_named() {
    let err = dequantize(GgmlType::IQ2_XXS, &[0; 66], &mut [0.0; 256]).unwrap_err();
    assert_eq!(err, DequantError::Unsupported(GgmlType::IQ2_XXS));
    assert!(err.to_string().contains("IQ2_XXS"));
}

#[test]
fn wrong_sizes_are_errors() {
    let err = dequantize(GgmlType::Q4_K, &[0; 144], &mut [0.0; 255]).unwrap_err();
    assert!(matches!(err, DequantError::SizeMismatch { .. }));
}
