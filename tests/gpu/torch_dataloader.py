"""A DataLoader with 4 forked workers under the shim: batches reach the GPU intact."""
import torch
from torch.utils.data import DataLoader, Dataset


class Rand(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 128, 128, generator=g), i


if __name__ == "__main__":
    torch.cuda.init()
    dl = DataLoader(Rand(), batch_size=16, num_workers=4,
                    multiprocessing_context="fork")
    n = 0
    for x, idx in dl:
        xd = x.to("cuda")
        assert torch.equal(xd.cpu(), x)
        assert abs(xd.double().sum().item() - x.double().sum().item()) < 1e-6 * x.numel()
        n += 1
    print(f"dataloader with 4 fork workers under the shim: {n} batches ok")
