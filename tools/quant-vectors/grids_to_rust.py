"""Writes src/quant/iq_grids.rs from ggml's `ggml-common.h`: the lattice tables the i-quants
index (a u64 holds 8 weights of one byte each, a u32 holds 4), the sign patterns and IQ4_NL's
16 levels, verbatim.

    python3 tools/quant-vectors/grids_to_rust.py path/to/ggml/src/ggml-common.h > src/quant/iq_grids.rs
"""
import re
import sys

TABLES = [
    ("ksigns_iq2xs", "u8", "KSIGNS_IQ2XS"),
    ("iq2xxs_grid", "u64", "IQ2XXS_GRID"),
    ("iq2xs_grid", "u64", "IQ2XS_GRID"),
    ("iq2s_grid", "u64", "IQ2S_GRID"),
    ("iq3xxs_grid", "u32", "IQ3XXS_GRID"),
    ("iq3s_grid", "u32", "IQ3S_GRID"),
    ("kvalues_iq4nl", "i8", "KVALUES_IQ4NL"),
    ("iq1s_grid", "u64", "IQ1S_GRID"),
]


def main(path):
    text = open(path).read()
    print("//! ggml's i-quant tables, generated from `ggml/src/ggml-common.h` (llama.cpp as vendored by")
    print("//! llama-cpp-python 0.3.36) by `tools/quant-vectors/grids_to_rust.py`; do not edit by hand.")
    print("//! A `u64` grid entry holds 8 weights (byte i = weight i), a `u32` entry 4.")
    print()
    for cname, ty, rname in TABLES:
        m = re.search(r"GGML_TABLE_BEGIN\(\w+, " + cname + r", (\w+)\)(.*?)GGML_TABLE_END\(\)", text, re.S)
        values = [v.strip() for v in m.group(2).replace("\n", " ").split(",") if v.strip()]
        print(f"pub static {rname}: [{ty}; {len(values)}] = [")
        per_line = 4 if ty == "u64" else 8 if ty == "u32" else 16
        for i in range(0, len(values), per_line):
            print("    " + " ".join(v + "," for v in values[i:i + per_line]))
        print("];")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
