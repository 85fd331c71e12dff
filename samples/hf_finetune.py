#!/usr/bin/env python3
"""Fine-tuning a transformers BERT built from a config (no download): a few steps of sequence
classification on random tokens that live in CPU memory and are moved with .to('cuda') each step.

    python3 samples/hf_finetune.py [--steps 30] [--warmup 5] [--layers 6] [--batch 64] [--seq 512]

Deterministic (fixed seeds, eager attention, torch.use_deterministic_algorithms; set
CUBLAS_WORKSPACE_CONFIG=:4096:8), so the losses must be bit-identical with and without pinwheel:
they are printed as hex floats on the "losses" line, and the last one exactly (repr) at the end.  Prints the mean ms/step after --warmup.
Exits 2 when transformers is not installed.
"""
import argparse
import os
import sys
import time

import torch

try:
    from transformers import BertConfig, BertForSequenceClassification
except ImportError:
    print("hf_finetune: SKIP: transformers is not installed (pip install transformers)")
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=512)
    a = ap.parse_args()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    cfg = BertConfig(num_hidden_layers=a.layers, num_labels=4, max_position_embeddings=a.seq,
                     attn_implementation="eager")
    model = BertForSequenceClassification(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    n_batches = 8
    ids = [torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g) for _ in range(n_batches)]
    mask = [torch.ones(a.batch, a.seq, dtype=torch.long) for _ in range(n_batches)]
    labels = [torch.randint(0, 4, (a.batch,), generator=g) for _ in range(n_batches)]
    losses = []
    t0 = None
    for step in range(a.steps):
        if step == a.warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        i = step % n_batches
        out = model(input_ids=ids[i].to("cuda"), attention_mask=mask[i].to("cuda"),
                    labels=labels[i].to("cuda"))
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(out.loss.detach())
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / max(1, a.steps - a.warmup)
    vals = [float(v) for v in losses]
    print("losses " + " ".join(v.hex() for v in vals))
    print(f"hf_finetune: BERT {a.layers} layers, batch {a.batch}x{a.seq}: {ms:.2f} ms/step, "
          f"final loss {vals[-1]!r}")


if __name__ == "__main__":
    main()
