"""A DataLoader with 4 forked workers under the shim: batches reach the GPU intact.

    torch_dataloader.py [--batch 16] [--size 128] [--samples 256]

Batches of --batch samples of 3 x --size x --size float32 arrive in shared memory; each is copied
to the GPU, compared with the CPU batch byte for byte (and its last sample with the one its index
names), then dropped.  With batches of 16 MiB or
more (e.g. --batch 64 --size 256: 48 MiB) the drop's unmap is what pinwheel moves off the thread.
"""
import argparse

import torch
from torch.utils.data import DataLoader, Dataset


class Rand(Dataset):
    def __init__(self, n, size):
        self.n, self.size = n, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, self.size, self.size, generator=g), i


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--samples", type=int, default=256)
    a = ap.parse_args()
    torch.cuda.init()
    dl = DataLoader(Rand(a.samples, a.size), batch_size=a.batch, num_workers=4,
                    multiprocessing_context="fork")
    n = 0
    for x, idx in dl:
        xd = x.to("cuda")
        assert torch.equal(xd.cpu(), x)
        assert abs(xd.double().sum().item() - x.double().sum().item()) < 1e-6 * x.numel()
        # the batch is the samples its indices name: a batch dropped early would show here
        assert torch.equal(x[-1], Rand(a.samples, a.size)[int(idx[-1])][0])
        n += 1
        del x, xd
    mib = a.batch * 3 * a.size * a.size * 4 / 2**20
    print(f"dataloader with 4 fork workers under the shim: {n} batches of {mib:.0f} MiB ok")
