"""Records what the official LLaDA sampler writes with the shipped GGUF's weights, for dllm's
end-to-end test (tests/suite/demo_model.rs). The weights are read back from the Q8_0 GGUF and
dequantized, so the reference runs exactly the numbers dllm loads, in float32 PyTorch.

Usage: python3 record_reference.py --gguf ../../assets/demo-model-Q8_0.gguf --build build/ --out ../../tests/data/demo/expected.json
"""

import argparse
import json

import numpy as np
import torch
import torch.nn.functional as F
from gguf import GGUFReader
from gguf.quants import dequantize
from tokenizers import Tokenizer

from export_gguf import tensor_names, unpermute
from model import Config, LLaDA

PROMPTS = [
    # (text, chat template applied)
    ("Once upon a time", False),
    ("Tell me a story about a cat.", True),
    ("Write a short story about Tom and a dog.", True),
]
SETTINGS = dict(gen_length=192, steps=192, block_length=32)


def get_num_transfer_tokens(mask_index, steps):
    """ML-GSAI/LLaDA generate.py (commit b7e6c356), unchanged."""
    mask_num = mask_index.sum(dim=1, keepdim=True)
    base = mask_num // steps
    remainder = mask_num % steps
    num_transfer_tokens = torch.zeros(mask_num.size(0), steps, dtype=torch.int64) + base
    for i in range(mask_num.size(0)):
        num_transfer_tokens[i, : remainder[i]] += 1
    return num_transfer_tokens


@torch.no_grad()
def generate(model, prompt, steps, gen_length, block_length, mask_id, record=None):
    """ML-GSAI/LLaDA generate.py `generate` at temperature 0 (add_gumbel_noise is then the
    identity), cfg_scale 0, remasking 'low_confidence'."""
    x = torch.full((1, prompt.shape[1] + gen_length), mask_id, dtype=torch.long)
    x[:, : prompt.shape[1]] = prompt.clone()
    num_blocks = gen_length // block_length
    steps = steps // num_blocks
    for num_block in range(num_blocks):
        start = prompt.shape[1] + num_block * block_length
        block_mask_index = x[:, start : start + block_length] == mask_id
        num_transfer_tokens = get_num_transfer_tokens(block_mask_index, steps)
        for i in range(steps):
            mask_index = x == mask_id
            logits = model(x)
            x0 = torch.argmax(logits, dim=-1)
            p = F.softmax(logits, dim=-1)
            x0_p = torch.squeeze(torch.gather(p, dim=-1, index=torch.unsqueeze(x0, -1)), -1)
            x0_p[:, start + block_length :] = -np.inf
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, x0_p, -np.inf)
            transfer_index = torch.zeros_like(x0, dtype=torch.bool)
            for j in range(confidence.shape[0]):
                _, select_index = torch.topk(confidence[j], k=num_transfer_tokens[j, i])
                transfer_index[j, select_index] = True
            if record is not None:
                # Per step: the positions committed and, for every candidate (a masked position
                # of the block), its token, confidence and the gap between its two largest
                # logits, so that a test can tell a near-tie from a real difference.
                top2 = torch.topk(logits[0], 2, dim=-1).values
                candidates = {
                    p: [int(x0[0, p]), round(float(confidence[0, p]), 7), round(float(top2[p, 0] - top2[p, 1]), 5)]
                    for p in mask_index[0].nonzero().flatten().tolist()
                    if confidence[0, p] > -1
                }
                record.append(dict(committed=transfer_index[0].nonzero().flatten().tolist(), candidates=candidates))
            x[transfer_index] = x0[transfer_index]
    return x


def load_from_gguf(path: str, cfg: Config) -> LLaDA:
    reader = GGUFReader(path)
    model = LLaDA(cfg)
    state = model.state_dict()
    names = {g: (hf, qk) for g, hf, qk in tensor_names(cfg.n_layers)}
    for t in reader.tensors:
        hf, qk = names[t.name]
        data = dequantize(t.data, t.tensor_type).reshape(state[hf].shape)
        data = unpermute(data, cfg.n_heads) if qk else data
        state[hf] = torch.from_numpy(np.ascontiguousarray(data, dtype=np.float32))
    model.load_state_dict(state)
    return model.eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ckpt = torch.load(f"{args.build}/model.pt")
    cfg = Config(**ckpt["config"])
    model = load_from_gguf(args.gguf, cfg)
    tok = Tokenizer.from_file(f"{args.build}/tokenizer.json")
    bos, mask_id = tok.token_to_id("<|startoftext|>"), tok.token_to_id("<|mdm_mask|>")
    ends = {tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|eot_id|>")}
    cases = []
    for text, chat in PROMPTS:
        body = (
            f"<|start_header_id|>user<|end_header_id|>\n\n{text}<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
            if chat
            else text
        )
        prompt_ids = [bos] + tok.encode(body).ids
        steps = []
        out = generate(model, torch.tensor([prompt_ids]), mask_id=mask_id, record=steps, **SETTINGS)[0].tolist()
        answer = out[len(prompt_ids) :]
        end = next((i for i, t in enumerate(answer) if t in ends), len(answer))
        cases.append(
            dict(prompt=text, chat=chat, prompt_ids=prompt_ids, **SETTINGS, canvas=out, text=tok.decode(answer[:end]),
                 trace=steps)
        )
        print(json.dumps(cases[-1]["text"]))
    with open(args.out, "w") as f:
        json.dump(dict(source="tools/demo-model/record_reference.py: ML-GSAI/LLaDA generate.py on the GGUF's dequantized weights, float32", cases=cases), f, indent=1)


if __name__ == "__main__":
    main()
