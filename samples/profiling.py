"""--profile PATH for the samples: a torch.profiler Chrome trace (CPU and CUDA activity, one
`ProfilerStep#N` range per step) of `steps` steps after `skip` untimed ones.  A name ending in
.gz is written gzipped.  `pinwheel report PATH` reads it.  Without a path, a no-op."""
import torch


class _Off:
    def step(self):
        pass

    def stop(self):
        pass


class _On:
    def __init__(self, path, skip, steps):
        from torch.profiler import ProfilerActivity, profile, schedule
        self.p = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                         schedule=schedule(wait=max(skip - 1, 0), warmup=1 if skip else 0,
                                           active=steps, repeat=1),
                         on_trace_ready=lambda p: p.export_chrome_trace(path))
        self.path = path
        self.p.start()

    def step(self):
        self.p.step()

    def stop(self):
        torch.cuda.synchronize()
        self.p.stop()
        print(f"trace written: {self.path}", flush=True)


def add_args(p, default_steps=6):
    p.add_argument("--profile", metavar="PATH",
                   help="write a torch.profiler trace of --profile-steps steps after the warm-up")
    p.add_argument("--profile-steps", type=int, default=default_steps)


def start(args, skip):
    return _On(args.profile, skip, args.profile_steps) if args.profile else _Off()
