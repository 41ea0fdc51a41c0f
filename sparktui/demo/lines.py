"""The lines sparktui reads back from the demo engine, per engine, in one place.

The ready lines are the adapters' (``core/engines/sglang.py``, ``vllm.py``) and the fatal lines
the ones their ``FATAL_LINES`` catch; the demo cannot import sparktui, so
``tests/demo/test_lines.py`` holds these constants against the adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

ENGINE_NAME = "sparktui demo engine"
KV_TOKENS = 65536  # the demo model's KV cache and context, as its boot lines and API print them
CONTEXT_LEN = 32768

# exit codes (the "DEMO fatal" lines name them)
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_SIMULATED = 3
EXIT_GROUP_LOST = 4

READY_LINE = "The server is fired up and ready to roll!"
WORKER_READY_LINE = "Worker ready; serving /health on port {port}"
VLLM_READY_LINE = "Application startup complete."
VLLM_WORKER_READY_LINE = "DEMO headless worker ready: rank {rank} of {world} (--headless: no HTTP port)"
RENDEZVOUS_OK_LINE = "DEMO rendezvous ok: world={world} rank={rank} peers={peers}"
NCCL_INIT_LINE = ("NCCL INFO comm 0x7f3a5c00{rank:02d} rank {rank} nranks {world} cudaDev 0 nvmlDev 0 "
                  "busId 1000 commId 0x9e2b41d6c3a07f15 - Init COMPLETE")
"""Printed by every rank once the group formed, when ``--demo-hang-rank`` asks for a hang."""
TICK_LINE = "demo tick {n}"
SHUTDOWN_LINE = "Received {signame}, shutting down"

NCCL_ERROR = ("RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
              "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3")
TRACEBACK = "Traceback (most recent call last):"

_TORCH = "/usr/local/lib/python3.12/dist-packages/torch/distributed"
_Frame = tuple[str, int, str, str]


def fatal(reason: str, code: int) -> str:
    """The demo's own last line before it exits with ``code``."""
    return f"DEMO fatal: {reason}; exiting with code {code}"


def _frames(frames: list[_Frame]) -> list[str]:
    """A traceback's frames as Python prints them."""
    out: list[str] = []
    for path, lineno, func, code in frames:
        out += [f'  File "{path}", line {lineno}, in {func}', f"    {code}"]
    return out


def sglang_crash(rank: int, after_ready: bool, why: str) -> list[str]:
    """A realistic SGLang scheduler crash: Python traceback ending in an NCCL RuntimeError."""
    sgl = "/sgl-workspace/sglang/python/sglang/srt"
    if after_ready:
        frames = [
            (f"{sgl}/managers/scheduler.py", 2802, "run_scheduler_process",
             "scheduler.event_loop_overlap()"),
            (f"{sgl}/managers/scheduler.py", 1035, "event_loop_overlap",
             "batch_result = self.run_batch(batch)"),
            (f"{sgl}/managers/scheduler.py", 1911, "run_batch",
             "batch_result = self.model_worker.forward_batch_generation("),
            (f"{sgl}/model_executor/model_runner.py", 2041, "forward",
             "output = self._forward_raw("),
            (f"{sgl}/distributed/communication_op.py", 14, "tensor_model_parallel_all_reduce",
             "return get_tp_group().all_reduce(input_)"),
            (f"{_TORCH}/distributed_c10d.py", 2808, "all_reduce",
             "work = group.allreduce([tensor], opts)"),
        ]
    else:
        frames = [
            (f"{sgl}/managers/scheduler.py", 2791, "run_scheduler_process",
             "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
            (f"{sgl}/managers/scheduler.py", 318, "__init__",
             "self.tp_worker = TpModelWorker("),
            (f"{sgl}/managers/tp_worker.py", 84, "__init__",
             "self.model_runner = ModelRunner("),
            (f"{sgl}/model_executor/model_runner.py", 301, "initialize",
             "self.load_model()"),
            (f"{sgl}/model_executor/model_runner.py", 741, "load_model",
             "torch.distributed.barrier(group=get_tp_group().cpu_group)"),
            (f"{_TORCH}/c10d_logger.py", 81, "wrapper",
             "return func(*args, **kwargs)"),
            (f"{_TORCH}/distributed_c10d.py", 4635, "barrier",
             "work = group.barrier(opts=opts)"),
        ]
    return [
        f"Scheduler hit an exception: {TRACEBACK}",
        *_frames(frames),
        NCCL_ERROR,
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
        f"Last error: ({ENGINE_NAME}: {why})",
        "Received sigquit from a child process. It usually means the child failed.",
        fatal(f"simulated failure of rank {rank}", EXIT_SIMULATED),
    ]


def vllm_crash(rank: int, after_ready: bool, why: str) -> list[str]:
    """A realistic vLLM worker crash: the worker process's traceback ending in an NCCL error."""
    vllm = "/usr/local/lib/python3.12/dist-packages/vllm"
    if after_ready:
        frames = [
            (f"{vllm}/v1/executor/multiproc_executor.py", 591, "worker_busy_loop",
             "output = func(*args, **kwargs)"),
            (f"{vllm}/v1/worker/gpu_worker.py", 362, "execute_model",
             "output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)"),
            (f"{vllm}/distributed/communication_op.py", 14, "tensor_model_parallel_all_reduce",
             "return get_tp_group().all_reduce(input_)"),
            (f"{_TORCH}/distributed_c10d.py", 2808, "all_reduce",
             "work = group.allreduce([tensor], opts)"),
        ]
    else:
        frames = [
            (f"{vllm}/v1/executor/multiproc_executor.py", 559, "worker_main",
             "worker = WorkerProc(*args, **kwargs)"),
            (f"{vllm}/v1/worker/gpu_worker.py", 214, "load_model",
             "self.model_runner.load_model(eep_scale_up=eep_scale_up)"),
            (f"{vllm}/distributed/parallel_state.py", 1043, "barrier",
             "torch.distributed.barrier(group=self.cpu_group)"),
            (f"{_TORCH}/distributed_c10d.py", 4635, "barrier",
             "work = group.barrier(opts=opts)"),
        ]
    return [
        f"WorkerProc hit an exception (rank {rank}).",
        TRACEBACK,
        *_frames(frames),
        NCCL_ERROR,
        f"Last error: ({ENGINE_NAME}: {why})",
        fatal(f"simulated failure of rank {rank}", EXIT_SIMULATED),
    ]


def group_lost(rank: int, lost: int, said_bye: bool, host: str | None, port: int | None) -> list[str]:
    """What ``rank`` prints when ``lost`` left the formed group (torch's watchdog on the head,
    the TCPStore's lost connection on a worker); the same for both engines."""
    how = "shut down" if said_bye else "died"
    if rank == 0:
        first = (
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600000 milliseconds "
            "before timing out. "
            f"({ENGINE_NAME}: rank {lost} {how})"
        )
    else:
        first = (
            f"[rank{rank}]: [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Failed to check the "
            f"\"should dump\" flag on TCPStore at {host}:{port} (maybe TCPStore server has shut down too "
            "early), with error: Failed to recv, got 0 bytes. Connection was likely closed. "
            f"Did the remote server shutdown or crash? ({ENGINE_NAME}: rank 0 {how})"
        )
    return [first, fatal(f"the TP group fell apart (rank {lost} {how})", EXIT_GROUP_LOST)]


class EngineLines(NamedTuple):
    """One engine's lines that sparktui's adapter for it reads."""

    ready: str  # rank 0's: the adapter's ``ready_line``
    worker_ready: str  # a rank > 0's (a format string)
    crash: Callable[[int, bool, str], list[str]]  # (rank, after_ready, why): a simulated failure


SGLANG = EngineLines(READY_LINE, WORKER_READY_LINE, sglang_crash)
VLLM = EngineLines(VLLM_READY_LINE, VLLM_WORKER_READY_LINE, vllm_crash)
