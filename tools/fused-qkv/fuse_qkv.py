"""Rewrites a GGUF with each block's q, k and v projections (and biases) fused into one
`blk.N.attn_qkv.weight` (`.bias`), rows q then k then v, as newer llama.cpp converters write
them (`build_qkv` in llama.cpp's src/llama-graph.cpp reads the fused matrix so). Everything
else is copied as it is, so the fused file must give the same logits as the source.

    pip install numpy gguf
    python3 tools/fused-qkv/fuse_qkv.py SRC.gguf DST.gguf
"""
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGUFValueType


def main(src, dst):
    r = GGUFReader(src)
    arch = r.fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    w = GGUFWriter(dst, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == GGUFValueType.STRING:
                value = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
            else:
                value = [field.parts[i].tolist()[0] for i in field.data]
            w.add_key_value(name, value, vtype, sub_type=sub)
        elif vtype == GGUFValueType.STRING:
            w.add_key_value(name, bytes(field.parts[field.data[0]]).decode(), vtype)
        else:
            w.add_key_value(name, field.parts[field.data[0]].tolist()[0], vtype)
    tensors = {t.name: t for t in r.tensors}
    for t in r.tensors:
        parts = t.name.split(".")
        if len(parts) == 4 and parts[2] in ("attn_k", "attn_v"):
            continue
        if len(parts) == 4 and parts[2] == "attn_q":
            blk, kind = ".".join(parts[:2]), parts[3]
            pieces = [tensors[f"{blk}.attn_{x}.{kind}"] for x in "qkv"]
            assert len({p.tensor_type for p in pieces}) == 1, "q, k and v of one type"
            # The reader's arrays are [rows, row bytes or values]: the rows are the outputs.
            data = np.concatenate([np.asarray(p.data) for p in pieces], axis=0)
            w.add_tensor(f"{blk}.attn_qkv.{kind}", data, raw_dtype=pieces[0].tensor_type)
            continue
        w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
