"""The machine a run trains on: its device, CPU threads, mixed precision and data-parallel processes."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import torch


def resolve_device(name: str) -> torch.device:
    """The device ``name`` names: "auto" (cuda if available), "cpu", "cuda", "cuda:1", ...

    Raises ValueError for a name torch does not know or a device this machine lacks.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; try cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda, but CUDA is not available on this machine")
    return device


def default_threads(world_size: int = 1) -> int:
    """CPU threads for one process: the idle cores less one, shared among the processes.

    More threads than idle cores is far worse than too few: on a shared 2-core machine a
    step took 3-10x longer with 2 threads than with 1 as soon as anything else ran (the
    threads wait for each other), so one core is left as headroom.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, (cores - round(busy) - 1) // world_size)


def threads_to_set(requested: int | None, *, device_type: str, on_main_thread: bool, default: int) -> int | None:
    """The torch CPU thread count a run should set, or None to leave the process's count alone.

    Only CPU runs set it: the count asked for (``TrainConfig.threads``) if any, else ``default``,
    but only on the main thread. The count is process-wide, so a run in a background thread
    (the app's) that set it would change it for every other session.
    """
    if device_type != "cpu":
        return None
    if requested is not None:
        return requested
    return default if on_main_thread else None


def configure_threads(requested: int | None, device: torch.device, world_size: int = 1) -> None:
    """Set torch's CPU threads as ``threads_to_set`` decides for the calling thread."""
    count = threads_to_set(requested, device_type=device.type,
                           on_main_thread=threading.current_thread() is threading.main_thread(),
                           default=default_threads(world_size))
    if count is not None:
        torch.set_num_threads(count)


def amp_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype: mixed precision on CUDA only (CPU autocast does not pay off here)."""
    if device.type != "cuda" or amp == "off":
        return None
    if amp == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if amp == "bf16" else torch.float16


@dataclass
class Distributed:
    """This process's place among the data-parallel processes (one process: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed(device_type: str = "cuda") -> Distributed:
    """Join the process group when launched by torchrun (RANK / WORLD_SIZE in the environment): NCCL for a run on
    CUDA, gloo for a run on the CPU (also on a machine that has a GPU: NCCL cannot reduce CPU tensors)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Distributed()
    import torch.distributed as dist

    backend = "nccl" if device_type == "cuda" and torch.cuda.is_available() else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return Distributed(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
