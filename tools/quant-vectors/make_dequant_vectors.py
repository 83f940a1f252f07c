"""Dequantization vectors for the types ../shared/reference/dequant lacks (the i-quants), made
the way that set was: 4 random blocks per type, every byte random except the f16 scale fields,
which are set to finite values; the expected values are gguf-py's `gguf.quants.dequantize`.

    pip install numpy gguf
    python3 tools/quant-vectors/make_dequant_vectors.py tests/data/dequant

Writes OUT/<TYPE>.raw (the blocks) and OUT/<TYPE>.f32 (little-endian f32 values).
"""
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T, GGML_QUANT_SIZES
from gguf.quants import dequantize

# Byte offset of the f16 super-block scale `d` in each type's block (ggml-common.h).
D_AT_START = [T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ3_XXS, T.IQ3_S, T.IQ1_S, T.IQ4_NL, T.IQ4_XS]


def finite_f16(rng, n):
    return rng.uniform(-2.0, 2.0, n).astype(np.float16).view(np.uint8).reshape(n, 2)


def blocks(ty, rng, n_blocks=4):
    block_values, block_bytes = GGML_QUANT_SIZES[ty]
    raw = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    if ty in D_AT_START:
        raw[:, 0:2] = finite_f16(rng, n_blocks)
    elif ty == T.IQ1_M:
        # d is the top nibble of each of the four u16 scales at the block's end (qs[32], qh[16],
        # scales[8]): write a finite f16 there, nibble by nibble.
        d = finite_f16(rng, n_blocks).view(np.uint16).reshape(n_blocks)
        sc = raw[:, 48:56].copy().view(np.uint16)
        for i in range(4):
            sc[:, i] = (sc[:, i] & 0x0FFF) | (((d >> (4 * i)) & 0xF) << 12)
        raw[:, 48:56] = sc.view(np.uint8)
    else:
        raise ValueError(ty)
    return raw


def main(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261202)
    for ty in [T.IQ1_S, T.IQ1_M, T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ3_XXS, T.IQ3_S, T.IQ4_NL, T.IQ4_XS]:
        raw = blocks(ty, rng)
        values = dequantize(raw.reshape(-1), ty).astype("<f4")
        assert np.all(np.isfinite(values)), ty.name
        (out / f"{ty.name}.raw").write_bytes(raw.tobytes())
        (out / f"{ty.name}.f32").write_bytes(values.tobytes())
        print(ty.name, raw.shape, values.shape)


if __name__ == "__main__":
    main(sys.argv[1])
