"""The naive training loop: batches in pageable CPU memory, blocking x.to('cuda') every step.

Run it as is, or under pinwheel with no code change:
    pinwheel run -- python samples/train_naive.py
"""
import train_common as tc


def main():
    args = tc.parse_args(__doc__)
    if args.data == "gpu":
        cache = {}

        def get_batch(i, xs, ys):  # the limit: data already resident on the GPU
            k = i % len(xs)
            if k not in cache:
                cache[k] = (xs[k].to("cuda"), ys[k].to("cuda"))
            return cache[k]

        tc.run(args, "train_naive(data on gpu)", get_batch)
        return

    def get_batch(i, xs, ys):
        k = i % len(xs)
        return xs[k].to("cuda"), ys[k].to("cuda")

    tc.run(args, "train_naive", get_batch)


if __name__ == "__main__":
    main()
