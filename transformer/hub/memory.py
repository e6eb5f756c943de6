"""Will a model fit? Its memory, by arithmetic on its config, against the memory free now, before anything is built.

A 600 M-parameter model (NLLB-200 distilled, mBART-50) takes 2.4 GB in float32; opening one on a machine without
that much would end in the kernel's out-of-memory killer, not in a message. So ``load_hf`` asks first:

    needed = parameters x (bytes per value of the chosen dtype + ``READ_BYTES``) + the tokenizer's bytes

the model itself, plus the weights as the files give them while the model is filled (at most float32, as the Hub
stores these models), plus what its tokenizer takes (a bound from its files' sizes:
``tokenizer_json.tokenizer_file_bytes``), against ``MemAvailable`` of ``/proc/meminfo`` (or
``psutil.virtual_memory().available`` where psutil is installed). On a CUDA device the model's own bytes are also
compared with the device's free memory. Where the free memory cannot be read (not Linux, no psutil) nothing is
refused.
"""

from __future__ import annotations

from pathlib import Path

import torch

READ_BYTES = 4  # bytes per value of the weights as read from the files (float32)
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
MEMINFO = Path("/proc/meminfo")


def check_dtype(dtype: torch.dtype | None) -> torch.dtype:
    """``dtype`` (float32 when None) if the model can be kept in it; ValueError listing the choices otherwise."""
    dtype = torch.float32 if dtype is None else dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one a model is kept in; choose one of "
                         f"{', '.join(str(d) for d in DTYPES)}")
    return dtype


def available_memory() -> int | None:
    """Bytes of memory free for a new allocation now (psutil, else MemAvailable); None where unknown."""
    try:
        import psutil  # optional: never a dependency of this package
    except ImportError:
        psutil = None
    if psutil is not None:
        return int(psutil.virtual_memory().available)
    try:
        for line in MEMINFO.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # "MemAvailable:   12345678 kB"
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def memory_problem(n_parameters: int, dtype: torch.dtype, device: str | torch.device = "cpu", *,
                   available: int | None = None, tokenizer_bytes: int = 0) -> str | None:
    """Why a model of ``n_parameters`` in ``dtype`` with a tokenizer of ``tokenizer_bytes`` would not fit (the
    figures in the message), or None. ``available``: the free bytes (default: ``available_memory()``)."""
    item = torch.empty((), dtype=dtype).element_size()
    needed = n_parameters * (item + READ_BYTES) + tokenizer_bytes
    free = available_memory() if available is None else available
    if free is not None and needed > free:
        tokenizer = f", its tokenizer, {_gb(tokenizer_bytes)}," if tokenizer_bytes else ","
        return (f"the model has {n_parameters:,} parameters: in {str(dtype).removeprefix('torch.')} it needs about "
                f"{_gb(needed)} of memory to load (the model, {_gb(n_parameters * item)}{tokenizer} and its weights "
                f"as read), but {_gb(free)} is free; free some memory or choose dtype=torch.float16 / "
                "torch.bfloat16")
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        free_gpu, _ = torch.cuda.mem_get_info(device)
        if n_parameters * item > free_gpu:
            return (f"the model needs {_gb(n_parameters * item)} on {device} but {_gb(free_gpu)} is free there")
    return None
