#!/usr/bin/env python3
"""Lightning Trainer.fit with a DataLoader of large pageable batches (64 MiB float32 by default)
and a small MLP: copy-bound, so staging shows.

    python3 samples/lightning_fit.py [--steps 80] [--warmup 10] [--mib 64] [--check]

The dataset hands out whole batches (DataLoader batch_size=None), so no collate runs per step:
collate's stacking of samples varies from run to run by more than the copy costs, which is what
hid the effect before.  Lightning moves each batch to the GPU itself (batch_to_device).  Prints the
mean ms/step after --warmup and the final loss exactly (repr; deterministic: the same with and
without pinwheel).  --check compares every batch on the GPU with its CPU original (slow) and exits
1 when one differs.  Exits 2 when lightning is not installed.
"""
import argparse
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

try:
    import lightning as L
except ImportError:
    try:
        import pytorch_lightning as L
    except ImportError:
        print("lightning_fit: SKIP: lightning is not installed (pip install lightning)")
        sys.exit(2)


class Batches(Dataset):
    def __init__(self, n, rows, width):
        g = torch.Generator().manual_seed(1)
        self.x = [torch.randn(rows, width, generator=g) for _ in range(n)]
        self.y = [torch.randn(rows, 1, generator=g) for _ in range(n)]

    def __len__(self):
        return 1 << 30  # as many steps as max_steps asks for

    def __getitem__(self, i):
        return self.x[i % len(self.x)], self.y[i % len(self.x)], i % len(self.x)


class MLP(L.LightningModule):
    def __init__(self, width, data, check):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(width, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
        self.data, self.check, self.bad, self.last = data, check, 0, None

    def training_step(self, batch, i):
        x, y, k = batch
        if self.check and not (torch.equal(x.cpu(), self.data.x[int(k)]) and torch.equal(y.cpu(), self.data.y[int(k)])):
            self.bad += 1
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.last = loss.detach()
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-3)


class Clock(L.Callback):
    def __init__(self, warmup):
        self.warmup, self.t0 = warmup, None

    def on_train_batch_start(self, trainer, module, batch, i):
        if i == self.warmup:
            torch.cuda.synchronize()
            self.t0 = time.perf_counter()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    L.seed_everything(0, workers=True, verbose=False)
    width = 4096
    data = Batches(8, (a.mib << 20) // 4 // width, width)
    model = MLP(width, data, a.check)
    clock = Clock(a.warmup)
    trainer = L.Trainer(accelerator="gpu", devices=1, max_steps=a.steps, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, deterministic=True, callbacks=[clock])
    trainer.fit(model, DataLoader(data, batch_size=None, num_workers=0))
    torch.cuda.synchronize()
    ms = (time.perf_counter() - clock.t0) * 1e3 / (a.steps - a.warmup)
    loss = float(model.last)
    print(f"lightning_fit: {a.mib} MiB batches, {a.steps} steps: {ms:.2f} ms/step, final loss "
          f"{loss!r}" + (f", checked {a.steps} batches, bytes {'ok' if not model.bad else 'DIFFER'}"
                             if a.check else ""))
    sys.exit(1 if model.bad else 0)


if __name__ == "__main__":
    main()
