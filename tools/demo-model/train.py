"""Trains the demo model: BPE tokenizer on the generated corpus, then LLaDA's masked-diffusion objective.

Usage: python3 train.py --out build/ [--minutes 50] [--stories 100000] [--seed 0]
       python3 train.py --out build/ --resume --minutes 30 --lr 8e-4   (a second phase)
Writes build/tokenizer.json, build/model.pt (weights + config) and build/train-log.json
(a resumed phase keeps the tokenizer, continues from model.pt and appends to the log).
"""

import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn.functional as F
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from corpus import stories
from model import Config, LLaDA

# llama.cpp's "llama-bpe" pre-tokenizer, so GGUF readers split text exactly as this tokenizer was trained.
LLAMA_BPE_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BPE_TOKENS = 1018
SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|mdm_mask|>"]
SEQ_LEN = 256


def chat(request: str, answer: str) -> str:
    """LLaDA-8B-Instruct's chat template (without BOS, which the sequence builder adds)."""
    return (
        f"<|start_header_id|>user<|end_header_id|>\n\n{request}<|eot_id|>"
        f"<|start_header_id|>assistant<|end_header_id|>\n\n{answer}<|eot_id|>"
    )


def train_tokenizer(texts: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA_BPE_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    assert tok.get_vocab_size() == BPE_TOKENS, tok.get_vocab_size()
    tok.add_special_tokens(SPECIALS)
    return tok


def build_sequences(tok: Tokenizer, pairs, seed: int):
    """Half the stories as raw text, half as chat turns answering a request. Returns (ids, first_maskable)."""
    bos, eos = tok.token_to_id("<|startoftext|>"), tok.token_to_id("<|endoftext|>")
    rng = random.Random(seed)
    seqs, starts = [], []
    for request, text in pairs:
        if rng.random() < 0.5:
            ids = [bos] + tok.encode(text).ids + [eos]
            start = 1  # BOS is never masked
        else:
            prompt = chat(request, "").split("<|start_header_id|>assistant")[0] + (
                "<|start_header_id|>assistant<|end_header_id|>\n\n"
            )
            prompt_ids = [bos] + tok.encode(prompt).ids
            ids = prompt_ids + tok.encode(text + "<|eot_id|>").ids
            start = len(prompt_ids)  # as in LLaDA's SFT: the prompt is never masked
        if len(ids) > SEQ_LEN:
            continue
        seqs.append(ids + [eos] * (SEQ_LEN - len(ids)))  # EOS padding is part of the answer, as in LLaDA SFT
        starts.append(start)
    return torch.tensor(seqs, dtype=torch.long), torch.tensor(starts, dtype=torch.long)


def masked_diffusion_loss(model, ids, starts, mask_id, generator):
    """LLaDA's objective: t per sequence (stratified over the batch), p = (1 - eps) t + eps,
    cross-entropy on masked tokens divided by p, averaged over each sequence's maskable tokens."""
    b, n = ids.shape
    eps = 1e-3
    t = (torch.arange(b) + torch.rand(b, generator=generator)) / b
    t = t[torch.randperm(b, generator=generator)]
    p = ((1 - eps) * t + eps)[:, None].expand(b, n)
    maskable = torch.arange(n)[None, :] >= starts[:, None]
    masked = (torch.rand(b, n, generator=generator) < p) & maskable
    noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
    logits = model(noisy)
    ce = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids.view(-1), reduction="none").view(b, n)
    weighted = (ce / p * masked).sum(1) / maskable.sum(1)
    plain = (ce * masked).sum() / masked.sum().clamp(min=1)
    return weighted.mean(), plain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=50)
    ap.add_argument("--stories", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=float, default=45.0, help="seconds of linear warm-up")
    ap.add_argument("--resume", action="store_true", help="continue from OUT/model.pt with its tokenizer")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    # A resumed phase draws its batches in a different order from the phase before.
    phase = 0
    if args.resume:
        with open(os.path.join(args.out, "train-log.json")) as f:
            phase = len(json.load(f).get("phases", [None]))
    generator = torch.Generator().manual_seed(args.seed + phase)

    pairs = stories(args.stories, args.seed)
    if args.resume:
        tok = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    else:
        tok = train_tokenizer([t for _, t in pairs[:20_000]] + [r for r, _ in pairs[:20_000]])
        tok.save(os.path.join(args.out, "tokenizer.json"))
    ids, starts = build_sequences(tok, pairs, args.seed)
    mask_id = tok.token_to_id("<|mdm_mask|>")
    lengths = (ids != tok.token_to_id("<|endoftext|>")).sum(1) + 1
    print(f"{len(ids)} sequences, {lengths.float().mean():.1f} tokens each before padding", flush=True)

    cfg = Config(vocab=tok.get_vocab_size())
    model = LLaDA(cfg)
    if args.resume:
        model.load_state_dict(torch.load(os.path.join(args.out, "model.pt"))["state"])
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{n_params / 1e6:.2f} M parameters", flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95),
    )
    budget = args.minutes * 60
    warmup = args.warmup
    began = time.time()
    log, step, seen, ema = [], 0, 0, None
    order = torch.randperm(len(ids), generator=generator)
    cursor = 0
    while (elapsed := time.time() - began) < budget:
        # Learning rate follows the wall clock: linear warm-up, cosine down to 5 % at the budget.
        lr = args.lr * (elapsed / warmup if elapsed < warmup else
                        0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * (elapsed - warmup) / (budget - warmup))))
        for group in opt.param_groups:
            group["lr"] = lr
        if cursor + args.batch > len(order):
            order, cursor = torch.randperm(len(ids), generator=generator), 0
        batch = order[cursor: cursor + args.batch]
        cursor += args.batch
        # Padding past the longest answer in the batch (plus a few EOS to learn to stop) is cut: it costs
        # compute and teaches nothing more.
        width = min(SEQ_LEN, int(lengths[batch].max()) + 8)
        loss, plain = masked_diffusion_loss(model, ids[batch, :width], starts[batch], mask_id, generator)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += args.batch * width
        ema = plain.item() if ema is None else 0.98 * ema + 0.02 * plain.item()
        if step % 100 == 0:
            entry = dict(step=step, minutes=round(elapsed / 60, 2), masked_ce=round(ema, 4), lr=lr,
                         tokens_per_s=round(seen / elapsed))
            log.append(entry)
            print(json.dumps(entry), flush=True)
            torch.save({"config": cfg.__dict__, "state": model.state_dict()}, os.path.join(args.out, "model.pt"))
    torch.save({"config": cfg.__dict__, "state": model.state_dict()}, os.path.join(args.out, "model.pt"))
    this_phase = dict(steps=step, minutes=round((time.time() - began) / 60, 1), peak_lr=args.lr,
                      final_masked_ce=round(ema, 4), tokens_seen=seen, log=log)
    phases = []
    if args.resume:
        with open(os.path.join(args.out, "train-log.json")) as f:
            old = json.load(f)
        phases = old.get("phases") or [{k: old[k] for k in ("steps", "minutes", "final_masked_ce", "tokens_seen", "log")}]
    phases.append(this_phase)
    summary = dict(parameters=n_params, seed=args.seed, stories=args.stories,
                   minutes=round(sum(p["minutes"] for p in phases), 1), final_masked_ce=this_phase["final_masked_ce"],
                   tokens_seen=sum(p["tokens_seen"] for p in phases), phases=phases)
    with open(os.path.join(args.out, "train-log.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
