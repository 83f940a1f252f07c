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
    // The i-quants' vectors were made with tools/quant-vectors/make_dequant_vectors.py.
    let types = [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
        IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS,
    ];
    for ty in types {
        assert!(ty.is_supported(), "{ty}");
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
    let err = dequantize(GgmlType::TQ1_0, &[0; 54], &mut [0.0; 256]).unwrap_err();
    assert_eq!(err, DequantError::Unsupported(GgmlType::TQ1_0));
    assert!(err.to_string().contains("TQ1_0"));
}

#[test]
fn wrong_sizes_are_errors() {
    let err = dequantize(GgmlType::Q4_K, &[0; 144], &mut [0.0; 255]).unwrap_err();
    assert!(matches!(err, DequantError::SizeMismatch { .. }));
}
