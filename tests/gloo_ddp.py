"""Records a real multi-rank CPU run: torch.distributed with gloo, one process per rank, a small DDP model, one
rank slowed on purpose (it sleeps before each step), every rank profiled into one logdir by
`tensorboard_trace_handler`. Used by the distributed tests as traces real torch writes."""
from __future__ import annotations

import glob
import os
import socket
import time

SLEEP_S = 0.15  # well above a descheduled rank's delay on a loaded machine, so the straggler is always this one
ACTIVE_STEPS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world: int, logdir: str, slow_rank: int, port: int, bucket_cap_mb: float) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                                            torch.nn.Linear(64, 8)), bucket_cap_mb=bucket_cap_mb)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(16, 64), torch.randn(16, 8)
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=ACTIVE_STEPS, repeat=1)
        handler = torch.profiler.tensorboard_trace_handler(logdir, worker_name=f"rank{rank}")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                    record_shapes=True, on_trace_ready=handler) as prof:
            for _ in range(1 + ACTIVE_STEPS):
                if rank == slow_rank:
                    time.sleep(SLEEP_S)  # the straggler: late at every step's gradient all-reduce
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                prof.step()
    finally:
        dist.destroy_process_group()
    # The traces are written. DDP's reducer still holds the gloo group, and freeing it after the group is destroyed
    # can deadlock in the group's destructor (a rank of a loaded run hung there): end the rank without destructors.
    os._exit(0)


def autograd_threads_started() -> bool:
    """Whether autograd's engine has started its device threads in this process (named ``pt_autograd_<device>``;
    builds with a device backend start them on the first backward). A child forked after that fails its own backward
    ("Unable to handle autograd's threading in combination with fork-based multiprocessing"). Without /proc the
    answer is "yes", the safe one."""
    tasks = glob.glob("/proc/self/task/*/comm")
    if not tasks:
        return True
    for comm in tasks:
        try:
            with open(comm) as f:
                if f.read().startswith("pt_autograd"):
                    return True
        except OSError:
            continue
    return False


def record(logdir: str, world: int = 3, slow_rank: int = 1, start_method: str = "",
           bucket_cap_mb: float = 25.0) -> str:
    """Run `world` gloo ranks and write their traces to `logdir`; returns it. Ranks are forked (the
    torch.multiprocessing.spawn API with the fork start method) so that they share this process's imported torch
    rather than importing it again each; they are spawned instead where autograd's threads already run here, which
    a forked child cannot use. `bucket_cap_mb`: DDP's gradient bucket size; a small one (0.001: 1 kB, under
    either layer's weight) splits the gradients into one bucket per layer, whose all-reduces are in flight
    together on gloo's worker threads at each step (DDP rebuilds its buckets after the warm-up step)."""
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel  # noqa: F401  (its imports, done once before forking)
    import torch._dynamo  # noqa: F401  DDP imports it on first construction: seconds per rank otherwise

    os.makedirs(logdir, exist_ok=True)
    method = start_method or ("spawn" if autograd_threads_started() else "fork")
    mp.start_processes(_rank_main, args=(world, logdir, slow_rank, _free_port(), bucket_cap_mb), nprocs=world,
                       join=True, start_method=method)
    return logdir
