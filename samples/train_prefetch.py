"""The hand-written prefetcher: pinned batches, a side torch.cuda.Stream, non_blocking copies,
wait_stream and record_stream.  The anchor pinwheel's naive run is compared against.
"""
import torch

import train_common as tc


class Prefetcher:
    def __init__(self, xs, ys):
        self.xs = [x.pin_memory() for x in xs]
        self.ys = [y.pin_memory() for y in ys]
        self.stream = torch.cuda.Stream()
        self.next = None

    def _load(self, i):
        k = i % len(self.xs)
        with torch.cuda.stream(self.stream):
            self.next = (self.xs[k].to("cuda", non_blocking=True),
                         self.ys[k].to("cuda", non_blocking=True))

    def get(self, i):
        if self.next is None:
            self._load(i)
        cur = torch.cuda.current_stream()
        cur.wait_stream(self.stream)
        x, y = self.next
        x.record_stream(cur)
        y.record_stream(cur)
        self._load(i + 1)
        return x, y


def main():
    args = tc.parse_args(__doc__)
    state = {}

    def get_batch(i, xs, ys):
        if "p" not in state:
            state["p"] = Prefetcher(xs, ys)
        return state["p"].get(i)

    tc.run(args, "train_prefetch", get_batch)


if __name__ == "__main__":
    main()
