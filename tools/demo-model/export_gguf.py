"""Writes the trained demo model as a llama.cpp-style LLaDA GGUF, its matrices quantized to Q8_0.

Usage: python3 export_gguf.py --build build/ --out ../../assets/demo-model-Q8_0.gguf
Follows llama.cpp's LLaDA conversion: tensor names, metadata keys, the q/k row permutation that
turns the NeoX half-split RoPE into interleaved pairs, and a GPT-2 style byte-level BPE vocabulary.
"""

import argparse
import json

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFWriter, LlamaFileType, TokenType
from gguf.quants import quantize
from tokenizers import Tokenizer

from train import SPECIALS

# LLaDA-8B-Instruct's chat template, as its GGUF conversions carry it.
CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permute: rows of each head from [x0..x31, y0..y31] to pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensor_names(n_layers: int):
    """(GGUF name, name in model.py's state dict, q/k permutation needed), in llama.cpp's order."""
    yield "token_embd.weight", "wte.weight", False
    for i in range(n_layers):
        p = f"blocks.{i}."
        yield f"blk.{i}.attn_norm.weight", p + "attn_norm.weight", False
        yield f"blk.{i}.attn_q.weight", p + "q_proj.weight", True
        yield f"blk.{i}.attn_k.weight", p + "k_proj.weight", True
        yield f"blk.{i}.attn_v.weight", p + "v_proj.weight", False
        yield f"blk.{i}.attn_output.weight", p + "attn_out.weight", False
        yield f"blk.{i}.ffn_norm.weight", p + "ff_norm.weight", False
        yield f"blk.{i}.ffn_gate.weight", p + "ff_proj.weight", False
        yield f"blk.{i}.ffn_up.weight", p + "up_proj.weight", False
        yield f"blk.{i}.ffn_down.weight", p + "ff_out.weight", False
    yield "output_norm.weight", "ln_f.weight", False
    yield "output.weight", "ff_out.weight", False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ckpt = torch.load(f"{args.build}/model.pt")
    cfg, state = ckpt["config"], {k: v.float().numpy() for k, v in ckpt["state"].items()}
    tok = Tokenizer.from_file(f"{args.build}/tokenizer.json")
    tok_json = json.loads(tok.to_str())

    w = GGUFWriter(args.out, "llada")
    w.add_name("dllm demo: children's stories")
    w.add_description("a 5.6 M-parameter demo model trained on generated children's stories (tools/demo-model)")
    w.add_context_length(cfg["context"])
    w.add_embedding_length(cfg["d_model"])
    w.add_block_count(cfg["n_layers"])
    w.add_feed_forward_length(cfg["mlp"])
    w.add_head_count(cfg["n_heads"])
    w.add_head_count_kv(cfg["n_heads"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["eps"])
    w.add_vocab_size(cfg["vocab"])
    w.add_rope_dimension_count(cfg["d_model"] // cfg["n_heads"])
    w.add_causal_attention(False)
    w.add_bool("diffusion.shift_logits", False)
    w.add_file_type(LlamaFileType.MOSTLY_Q8_0)
    w.add_quantization_version(2)

    vocab = tok.get_vocab()
    tokens = [None] * len(vocab)
    for piece, i in vocab.items():
        tokens[i] = piece
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types([TokenType.CONTROL if t in SPECIALS else TokenType.NORMAL for t in tokens])
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok_json["model"]["merges"]]
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|startoftext|>"])
    w.add_eos_token_id(vocab["<|endoftext|>"])
    w.add_eot_token_id(vocab["<|eot_id|>"])
    w.add_pad_token_id(vocab["<|endoftext|>"])
    w.add_mask_token_id(vocab["<|mdm_mask|>"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    for name, hf_name, qk in tensor_names(cfg["n_layers"]):
        t = state[hf_name]
        t = np.ascontiguousarray(permute(t, cfg["n_heads"]) if qk else t, dtype=np.float32)
        if t.ndim == 2:
            w.add_tensor(name, quantize(t, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
