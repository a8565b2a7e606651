"""Ground truth for Part V: real ``torch.distributed`` collectives across CPU processes.

:func:`run` starts one process group of ``world`` (2–4) CPU processes with the gloo backend,
runs a list of scenarios in it, and returns, for every rank, the collectives that actually
ran: their kind, the size of their tensors, their group, the phase of the step they ran in.
Each collective is caught where it is dispatched (a
:class:`torch.distributed.tensor.debug.CommDebugMode` that also records sizes), so plain
``torch.distributed`` calls, DTensor's, FSDP2's and autograd's are all seen, and
``CommDebugMode``'s own counts come back too.

What gloo moves on the wire is its business; the book counts **bytes sent per GPU by the
ring algorithm** (:mod:`tmath.comm`).  :func:`sent_bytes` turns a recorded collective into
those bytes from its kind, tensor size and group size (an all-to-all: the rows it sends to
the other ranks, read from its split sizes), and the tests compare them, exactly, with
:mod:`tmath.comm` and :mod:`tmath.layout`.

Scenarios (``name``: parameters):

``"collectives"``  all-reduce, all-gather, reduce-scatter, all-to-all and a ring of
                   send/recv on one fp32 array of ``numel`` elements; checks the values.
``"wire"``         bytes on the wire, measured: each rank's ``wchar`` from ``/proc/self/io``
                   (bytes its threads wrote, gloo's TCP sends included) read after a barrier,
                   before and after one collective, for every kind of :data:`tmath.comm.KINDS`
                   (send: a ring of send/recv) on fp32 arrays of each of ``numels`` elements,
                   in groups of each of ``groups`` ranks (the first ranks of the world: a
                   subgroup, in the same process group).  ``numel`` is the array the ring
                   formula's V names (the gathered output of an all-gather, each rank's
                   input otherwise).  Linux only: where ``/proc/self/io`` cannot be read the
                   ranks run nothing and say why (``"io_error"``).  See :func:`wire_bytes`.
``"tp_block"``     a tiny Llama block (RMSNorm, GQA attention, gated MLP) split by DTensor's
                   ``parallelize_module`` with ``ColwiseParallel``/``RowwiseParallel``
                   (``sp=True`` adds ``SequenceParallel`` on the norms), forward and backward
                   of an input that needs its gradient (a middle layer); checks output and
                   input gradient against the unsplit block.  ``fused=False`` keeps
                   wq, wk, wv and w1, w3 as separate matrices: DTensor's plain plan then
                   all-reduces the input gradient once per column-split matrix;
                   ``prepare_input=True`` (torchtitan's plan) adds ``PrepareModuleInput`` on
                   attention and MLP, so those gradients add up locally and are reduced once
                   per sub-block, as with fused matrices.  ``recompute="full"`` wraps the
                   block in ``torch.utils.checkpoint`` (its forward runs again in the backward,
                   phase ``"recompute"``); with ``early_stop`` (PyTorch's default) the
                   recomputation stops once it has rebuilt what the backward needs, so the
                   block's last collective is not run again; ``early_stop=False`` reruns the
                   whole forward, as Megatron-LM's checkpointing does.  ``"selective"``
                   checkpoints the attention core only.
``"ddp"``          ``layers`` such blocks in ``DistributedDataParallel`` (ZeRO-0): ``micro_batches``
                   micro-batches, the first ones under ``no_sync()`` (gradient accumulation),
                   so one all-reduce of the gradients per step, split into DDP's buckets
                   (``bucket_cap_mb``, MiB; two warm-up steps in phase ``"setup"`` let
                   DDP build them); records how many all-reduces had been launched when the
                   backward reached the first block (the overlap); checks gradients.
``"fsdp"``         ``layers`` such blocks, each wrapped by FSDP2's ``fully_shard`` (ZeRO-3),
                   forward and backward of ``micro_batches`` micro-batches; checks gradients.
                   ``reshard_after_forward=False`` keeps the gathered weights from the forward
                   for the backward (no second all-gather: ZeRO-2's traffic per micro-batch).
                   ``accumulate_unsharded=True`` calls ``set_requires_gradient_sync(False)``
                   and ``set_reshard_after_backward(False)`` for every micro-batch but the
                   last (FSDP2's gradient accumulation without communication: unsharded
                   gradients and weights kept between micro-batches, one reduce-scatter).
``"pipeline"``     one block per rank, a 1F1B pipeline over ``world`` stages with
                   ``micro_batches`` micro-batches, activations and gradients sent with
                   isend/irecv (Megatron's schedule); checks the weight gradients and
                   reports ``max_in_flight``, the most micro-batches whose activations
                   the stage held at once.
``"moe"``          a MoE layer of ``experts`` experts, top-``k`` routing (``"uniform"``:
                   token i goes to experts (i·k + j) mod E; ``"learned"``: a random router),
                   dispatch and combine with autograd's ``all_to_all_single``, forward and
                   backward; the token counts are exchanged first (phase ``"counts"``).
``"ring_attention"`` each rank holds T/world positions of Q, K, V; K and V travel round the
                   ring world−1 times, merged with the online softmax; checks the output
                   against full attention (``causal`` or not).  K and V travel in
                   ``kv_dtype`` (``"fp32"`` or ``"bf16"``; the reference attends to the same
                   rounded values).  ``backward=True`` adds ring-flash-attention's backward
                   (zhuzilin/ring-flash-attention): K, V round again (world−1 hops) and the
                   dK, dV of the chunk each rank holds, accumulated in fp32 on the way,
                   passed world hops, back to their owner; checks dQ, dK, dV against
                   autograd on full attention (``"max_err_grad"``).  Also returns
                   ``"wchar"``: each phase's bytes written (``/proc/self/io``, after a
                   barrier), ``None`` where it cannot be read or the phase did not run.

``"ddp"`` and ``"fsdp"`` also return ``"wchar"``: the bytes each rank wrote (``/proc/self/io``,
gloo's sends included) during the measured micro-batches, ``None`` where it cannot be read.

Keep the sizes tiny: the time goes into starting Python and importing torch.  One helper
process imports torch once and forks the ranks (the caller never imports torch), the ranks
meet through a file store in a fresh temporary directory (no port to collide with another
run), and every wait has a timeout.  A caller that has already imported torch (a kernel
that ran a torch cell) gives the helper by ``os.fork`` instead of a new interpreter, so
torch is not imported a second time; the ranks run the same code either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from typing import Any

from tmath import _cache

__all__ = ["SCENARIOS", "CACHE_ENV", "run", "sent_bytes", "bytes_by_phase", "wire_bytes",
           "tiny_config", "TINY"]

#: Environment variable naming a directory where :func:`run` keeps its results (tests only).
CACHE_ENV = "TMATH_DIST_CACHE"

#: The scenarios :func:`run` knows, with their default parameters.
SCENARIOS: dict[str, dict[str, Any]] = {
    "collectives": {"numel": 240},
    "wire": {"numels": [262144, 1048576], "groups": [2, 4]},
    "tp_block": {"d": 32, "heads": 8, "kv_heads": 4, "ffn": 64, "batch": 2, "seq": 8, "sp": False,
                 "fused": True, "prepare_input": False, "recompute": "none", "early_stop": True},
    "ddp": {"d": 32, "heads": 8, "kv_heads": 4, "ffn": 64, "batch": 2, "seq": 8, "layers": 2,
            "micro_batches": 2, "bucket_cap_mb": None},
    "fsdp": {"d": 32, "heads": 8, "kv_heads": 4, "ffn": 64, "batch": 2, "seq": 8, "layers": 2,
             "micro_batches": 2, "reshard_after_forward": True, "accumulate_unsharded": False},
    "pipeline": {"d": 32, "heads": 8, "kv_heads": 4, "ffn": 64, "batch": 2, "seq": 8,
                 "micro_batches": 3},
    "moe": {"d": 16, "ffn": 32, "experts": 8, "k": 2, "tokens": 16, "routing": "uniform"},
    "ring_attention": {"batch": 2, "heads": 4, "kv_heads": 2, "head_dim": 8, "seq": 32,
                       "causal": True, "backward": False, "kv_dtype": "fp32"},
}

#: Parameters that take one of a few values (checked before any process starts).
CHOICES: dict[tuple[str, str], tuple[Any, ...]] = {
    ("tp_block", "recompute"): ("none", "selective", "full"),
    ("moe", "routing"): ("uniform", "learned"),
    ("ring_attention", "kv_dtype"): ("fp32", "bf16"),
}

#: The tiny Llama block the scenarios build (D, N, K, F); :func:`tiny_config` makes the
#: matching :class:`tmath.ModelConfig` so a layout can be priced for the same shapes.
TINY: dict[str, int] = {"d": 32, "heads": 8, "kv_heads": 4, "ffn": 64}


def tiny_config(*, d: int = 32, heads: int = 8, kv_heads: int = 4, ffn: int = 64,
                layers: int = 1, experts: int = 0, k: int = 0, max_position: int = 4096,
                vocab: int = 64) -> Any:
    """The :class:`tmath.ModelConfig` of the blocks the scenarios build (Llama, or Mixtral
    when ``experts`` > 0: every layer a MoE layer of ``experts`` experts of width ``ffn``)."""
    from tmath.config import ModelConfig

    hf: dict[str, Any] = {"hidden_size": d, "intermediate_size": ffn, "num_hidden_layers": layers,
                          "num_attention_heads": heads, "num_key_value_heads": kv_heads,
                          "vocab_size": vocab, "max_position_embeddings": max_position}
    if experts:
        hf.update(model_type="mixtral", num_local_experts=experts, num_experts_per_tok=k)
    else:
        hf.update(model_type="llama")
    return ModelConfig.from_hf(hf, name=f"tiny-{hf['model_type']}")


# --- the parent side: no torch here --------------------------------------------------------


def _spec(scenarios: Any) -> list[dict[str, Any]]:
    out = []
    for s in scenarios:
        if isinstance(s, str):
            name, params = s, {}
        elif isinstance(s, (tuple, list)) and len(s) == 2:
            name, params = s
        elif isinstance(s, dict) and "name" in s:
            params = {k: v for k, v in s.items() if k != "name"}
            name = s["name"]
        else:
            raise ValueError(f"场景要写成名字、(名字, 参数) 或带 name 的 dict，收到 {s!r}")
        if name not in SCENARIOS:
            raise ValueError(f"未知的场景 {name!r}；可选：{', '.join(SCENARIOS)}")
        unknown = set(params) - set(SCENARIOS[name])
        if unknown:
            raise ValueError(f"场景 {name} 没有参数 {', '.join(sorted(unknown))}；"
                             f"它的参数是：{', '.join(SCENARIOS[name])}")
        for (sc, key), allowed in CHOICES.items():
            if sc == name and key in params and params[key] not in allowed:
                raise ValueError(f"场景 {name} 的参数 {key}={params[key]!r} 不可用；"
                                 f"可选：{', '.join(map(str, allowed))}")
        out.append({"name": name, "params": {**SCENARIOS[name], **params}})
    return out


def run(scenarios: Any, world: int = 4, timeout: float = 120.0) -> dict[str, Any]:
    """Run ``scenarios`` in one gloo process group of ``world`` CPU processes.

    ``scenarios``: names, ``(name, params)`` pairs or dicts with a ``"name"``; parameters
    default to :data:`SCENARIOS`.  Returns ``{"world", "seconds", "scenarios": [{"name",
    "params", "ranks": [one dict per rank: "records" (the collectives that ran) and what
    the scenario checked]}]}``, plain numbers only.  Raises ``RuntimeError`` with the ranks'
    tracebacks if a rank fails, and after ``timeout`` seconds.

    If the environment variable :data:`CACHE_ENV` names a directory, a result is kept there
    under a hash of the scenarios and world size, and a second call with the same ones in the
    same directory returns it (with ``"cached": True``) instead of starting the processes
    again.  The test suite sets it to a fresh directory per session, so that a chapter's
    nbval run and its "visible code runs alone" run, which execute the same call, pay for one
    process group; nothing sets it outside the tests.
    """
    from tmath._checks import int_arg

    world = int_arg("world", world)
    if not 2 <= world <= 8:
        raise ValueError(f"world={world}：进程数取 2 到 8（机器只有几个核）")
    spec = {"world": world, "timeout": float(timeout), "scenarios": _spec(scenarios)}
    for s in spec["scenarios"]:
        if s["name"] == "wire":
            _check_wire(world, **s["params"])
    cached_path, hit = _cache.lookup(CACHE_ENV, _cache_key(world, spec["scenarios"]))
    if hit is not None:
        return {**hit, "cached": True}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tmath-dist-") as tmp:
        path = os.path.join(tmp, "spec.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        try:
            returncode, err = _run_helper(path, tmp, timeout + 30)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"分布式运行超时（{timeout:.0f} s）：进程组没有按时结束") from None
        ranks = []
        errors = []
        for r in range(world):
            f = os.path.join(tmp, f"rank{r}.json")
            if not os.path.exists(f):
                errors.append(f"rank {r}: no result")
                continue
            with open(f, encoding="utf-8") as fh:
                res = json.load(fh)
            if "error" in res:
                errors.append(f"rank {r}:\n{res['error']}")
            ranks.append(res)
        if returncode or errors:
            raise RuntimeError("分布式运行失败（returncode {}）：\n{}\n{}".format(
                returncode, "\n".join(errors), err[-4000:]))
    results = []
    for i, s in enumerate(spec["scenarios"]):
        results.append({**s, "ranks": [r["scenarios"][i] for r in ranks]})
    out = {"world": world, "seconds": time.monotonic() - t0, "scenarios": results,
           "startup_seconds": ranks[0].get("startup_seconds"), "cached": False}
    if cached_path:
        _cache.store(cached_path, out)
    return out


def _check_wire(world: int, numels: Any, groups: Any) -> None:
    for k in groups:
        if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= world:
            raise ValueError(f"场景 wire 的 groups 里的 {k!r} 要是 2 到 world={world} 之间的整数")
        for numel in numels:
            if isinstance(numel, bool) or not isinstance(numel, int) or numel <= 0 or numel % k:
                raise ValueError(f"场景 wire 的 numels 里的 {numel!r} 要是能被 {k} 整除的正整数")


def _forks_helper() -> bool:
    """Whether :func:`run` forks this process as the helper: torch is already imported here,
    on Linux (macOS's system libraries are not safe to use in a forked child, which is why
    its multiprocessing spawns)."""
    return "torch" in sys.modules and sys.platform.startswith("linux")


def _run_helper(spec_path: str, outdir: str, timeout: float) -> tuple[int, str]:
    """Run the helper (:func:`_serve_spec`) on ``spec_path`` to its end: ``(exit code,
    what it wrote to stderr)``.  Raises ``subprocess.TimeoutExpired`` after ``timeout``
    seconds, the helper and its ranks killed.  The helper has a session of its own, so one
    ``killpg`` reaches the ranks too."""
    import signal

    if _forks_helper():
        return _fork_helper(spec_path, outdir, timeout)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, "-c", "import tmath.dist as d; d._serve()",
                             spec_path, outdir], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the helper we started and its ranks
        proc.communicate()
        raise
    return proc.returncode, err.decode(errors="replace")


def _fork_helper(spec_path: str, outdir: str, timeout: float) -> tuple[int, str]:
    """:func:`_run_helper` in a child forked from this process, which has imported torch.

    The child leaves this process's output alone (a Jupyter kernel's streams go to its
    front end): its stdout is /dev/null, its stderr a file read back here."""
    import signal
    import warnings

    err_path = os.path.join(outdir, "helper.stderr")
    with warnings.catch_warnings():  # Python 3.12+ warns of fork in a threaded process (a
        warnings.simplefilter("ignore", DeprecationWarning)  # kernel); the child only computes
        pid = os.fork()
    if pid == 0:  # the helper
        code = 1
        try:
            os.setsid()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            devnull = os.open(os.devnull, os.O_RDWR)
            err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            for fd, target in ((0, devnull), (1, devnull), (2, err_fd)):
                os.dup2(target, fd)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - for the child's life
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            warnings.simplefilter("ignore")  # as PYTHONWARNINGS=ignore for a new helper
            code = _serve_spec(spec_path, outdir)
        except BaseException:  # noqa: BLE001 - report it in the stderr file, then leave
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stderr.flush()
            finally:
                os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(f"tmath.dist helper {pid}", timeout)
        time.sleep(0.02)
    with open(err_path, encoding="utf-8", errors="replace") as fh:
        return os.waitstatus_to_exitcode(status), fh.read()


def _cache_key(world: int, scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    return {"world": world, "scenarios": scenarios}


def _cache_path(cache: str, world: int, scenarios: list[dict[str, Any]]) -> str:
    """Where :func:`run` keeps the result of ``scenarios`` on ``world`` ranks in ``cache``."""
    return _cache.path(cache, _cache_key(world, scenarios))


def sent_bytes(record: dict[str, Any]) -> int | Fraction:
    """Bytes one rank sends in a recorded collective, by the ring convention.

    All-reduce, all-gather, reduce-scatter: :func:`tmath.comm.bytes_sent` of the recorded
    kind, array bytes and group size; all-to-all: the rows sent to the other ranks (read from
    the split sizes: (n−1)/n of the input when they are even); send: the tensor; recv: 0.
    """
    from tmath import comm

    kind = record["kind"]
    if kind == "recv":
        return 0
    if kind == "all_to_all":
        return record["nbytes"] - record["own_bytes"]
    if kind not in comm.KINDS:
        raise ValueError(f"记录里的集合通信 {kind!r} 不按环形算法计价（只有 {', '.join(comm.KINDS)}）")
    return comm.bytes_sent(kind, record["nbytes"], record["group"])


def bytes_by_phase(scenario: dict[str, Any], *, skip: tuple[str, ...] = ("setup",)
                   ) -> list[dict[str, int | Fraction]]:
    """Per rank, ``{phase: bytes sent}`` over a scenario's records (:func:`sent_bytes`),
    leaving out the phases in ``skip`` (by default the setup: DTensor scatters the weights
    from rank 0 when it shards them, FSDP2 too; that is not a training step)."""
    out = []
    for rank in scenario["ranks"]:
        tot: dict[str, Any] = {}
        for rec in rank["records"]:
            if rec["phase"] not in skip:
                tot[rec["phase"]] = tot.get(rec["phase"], 0) + sent_bytes(rec)
        out.append(tot)
    return out


def wire_bytes(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a ``"wire"`` scenario: what each rank wrote, against the ring formula.

    One row per group size, array size and kind: ``{"kind", "group", "nbytes" (V of
    :func:`tmath.comm.bytes_sent`), "ring" (its bytes sent per rank), "measured" (each
    member rank's ``wchar`` delta), "ratio" (the largest delta over the formula, a
    Fraction)}``.  Raises ``RuntimeError`` with the ranks' reason where ``/proc/self/io``
    could not be read (not Linux, or no I/O accounting in the kernel).
    """
    from tmath import comm

    ranks = scenario["ranks"]
    if any(r.get("io_error") for r in ranks):
        raise RuntimeError("量不了网线上的字节：" + ranks[0]["io_error"])
    rows: dict[tuple[str, int, int], list[int]] = {}
    for r in ranks:
        for m in r["wire"]:
            rows.setdefault((m["kind"], m["group"], m["nbytes"]), []).append(m["wchar"])
    out = []
    for (kind, group, nbytes), measured in rows.items():
        ring = comm.bytes_sent(kind, nbytes, group)
        out.append({"kind": kind, "group": group, "nbytes": nbytes, "ring": ring,
                    "measured": measured, "ratio": Fraction(max(measured)) / Fraction(ring)})
    return out


# --- the helper and the ranks (torch from here on) ------------------------------------------


def _serve() -> None:
    """The helper process started by :func:`_run_helper`: ``SPEC_PATH OUTDIR`` in argv."""
    sys.exit(_serve_spec(sys.argv[1], sys.argv[2]))


def _serve_spec(spec_path: str, outdir: str) -> int:
    """The helper: import torch once, fork the ranks, wait for them; 0 if all ended well."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    t0 = time.monotonic()
    import torch  # noqa: F401  (imported before the fork, once for every rank)
    import torch.distributed  # noqa: F401
    from torch.distributed.tensor.debug import CommDebugMode  # noqa: F401

    names = {s["name"] for s in spec["scenarios"]}
    if "ddp" in names:
        import torch.nn.parallel  # noqa: F401
    if names & {"tp_block", "fsdp"}:
        import torch.distributed.tensor.parallel  # noqa: F401
    if "fsdp" in names:
        import torch.distributed.fsdp  # noqa: F401
    if "moe" in names:
        import torch.distributed.nn.functional  # noqa: F401
    startup = time.monotonic() - t0
    if sys.platform.startswith("linux") and os.path.exists("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    world, timeout = spec["world"], spec["timeout"]
    store = os.path.join(outdir, "store")
    pids = []
    for rank in range(world):
        pid = os.fork()
        if pid == 0:  # a rank
            code = 0
            try:
                _rank_main(rank, world, store, spec, outdir, startup)
            except BaseException:  # noqa: BLE001 - report everything, then leave
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    deadline = time.monotonic() + timeout
    status = 0
    pending = set(pids)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                pending.discard(pid)
                status |= int(os.waitstatus_to_exitcode(st) != 0)
        time.sleep(0.02)
    for pid in pending:  # our own ranks, still running after the deadline
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        status = 1
    return status


def _rank_main(rank: int, world: int, store: str, spec: dict[str, Any], outdir: str,
               startup: float) -> None:
    import traceback
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    result: dict[str, Any] = {"rank": rank, "scenarios": [], "startup_seconds": startup}
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=spec["timeout"]))
        for s in spec["scenarios"]:
            ctx = _Ctx(rank, world)
            torch.manual_seed(0)
            t0 = time.monotonic()
            extra = _RUNNERS[s["name"]](ctx, **s["params"])
            dist.barrier()
            result["scenarios"].append({"records": ctx.records, **(extra or {}),
                                        "seconds": time.monotonic() - t0})
        dist.destroy_process_group()
    except BaseException:
        result["error"] = traceback.format_exc()
        raise
    finally:
        with open(os.path.join(outdir, f"rank{rank}.json"), "w", encoding="utf-8") as fh:
            json.dump(result, fh)


class _Ctx:
    """One rank's recorder: ``phase`` labels what the scenario is doing."""

    def __init__(self, rank: int, world: int):
        self.rank, self.world = rank, world
        self.records: list[dict[str, Any]] = []
        self.phase = "setup"
        self.counts: dict[str, int] = {}

    def mode(self, debug: bool = False) -> Any:
        """A dispatch mode that records every collective; ``debug=True`` builds it on
        ``CommDebugMode`` (the DTensor scenarios), whose counts then come back too."""
        return _recorder(self, debug)


_KIND = {
    "allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce", "all_reduce": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "_allgather_base_": "all_gather", "allgather_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather", "all_gather_into_tensor": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "_reduce_scatter_base_": "reduce_scatter", "reduce_scatter_": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "alltoall_base_": "all_to_all", "all_to_all_single": "all_to_all", "alltoall_": "all_to_all",
    "send": "send", "recv_": "recv", "recv_any_source_": "recv",
    "broadcast_": "broadcast", "broadcast": "broadcast", "scatter_": "scatter",
    "gather_": "gather", "reduce_": "reduce", "barrier": "barrier",
}


def _recorder(ctx: _Ctx, debug: bool) -> Any:
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Plain(TorchDispatchMode):
        """Counts like CommDebugMode, without its module tracker (which trips over modules
        called outside a forward it saw begin, as in the pipeline)."""

        def __init__(self) -> None:
            super().__init__()
            self.comm_counts: dict[str, int] = {}

        def get_comm_counts(self) -> dict[str, int]:
            return self.comm_counts

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            if any(isinstance(t, type) and issubclass(t, DTensor) for t in types):
                return NotImplemented
            return func(*args, **(kwargs or {}))

    base = CommDebugMode if debug else _Plain

    namespaces = {"c10d", "_c10d_functional", "c10d_functional", "_c10d_functional_autograd"}

    def nbytes(t: Any) -> int:
        if isinstance(t, torch.Tensor):
            return t.numel() * t.element_size()
        return sum(nbytes(x) for x in t)

    def group_of(args: tuple) -> tuple[int, int]:
        for a in args:
            if isinstance(a, torch.ScriptObject):
                try:
                    pg = dist.ProcessGroup.unbox(a)
                except Exception:  # noqa: BLE001 - a ReduceOp, not a group
                    continue
                return pg.size(), pg.rank()
            if isinstance(a, str):
                try:
                    from torch.distributed.distributed_c10d import _resolve_process_group

                    pg = _resolve_process_group(a)
                except Exception:  # noqa: BLE001 - a reduce-op name such as "sum"
                    continue
                return pg.size(), pg.rank()
        return ctx.world, ctx.rank

    class Recorder(base):  # type: ignore[valid-type,misc]
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            if any(t is DTensor or (isinstance(t, type) and issubclass(t, DTensor))
                   for t in types):
                return super().__torch_dispatch__(func, types, args, kwargs)
            ns = getattr(func, "namespace", "")
            name = func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else ""
            if ns in namespaces and name in _KIND:
                self._record(ns, name, args)
                if not debug:
                    key = f"{ns}.{name}"
                    self.comm_counts[key] = self.comm_counts.get(key, 0) + 1
            return super().__torch_dispatch__(func, types, args, kwargs)

        def _record(self, ns: str, name: str, args: tuple) -> None:
            kind = _KIND[name]
            n, me = group_of(args)
            rec: dict[str, Any] = {"op": f"{ns}.{name}", "kind": kind, "group": n,
                                   "phase": ctx.phase}
            if ns == "c10d":
                if kind == "all_gather" and name == "_allgather_base_":
                    rec["nbytes"] = nbytes(args[0])  # the output
                elif kind == "reduce_scatter" and name == "_reduce_scatter_base_":
                    rec["nbytes"] = nbytes(args[1])  # the input
                elif kind == "all_to_all":
                    out, inp, _pg, out_splits, in_splits = args[:5]
                    rec["nbytes"] = nbytes(inp)
                    rows = inp.shape[0] if inp.dim() else 1
                    row = nbytes(inp) // max(rows, 1)
                    own = in_splits[me] if len(in_splits) else rows // n
                    rec["own_bytes"] = own * row
                    rec["splits"] = list(in_splits)
                elif kind in ("send", "recv"):
                    rec["nbytes"] = nbytes(args[0])
                    rec["peer"] = int(args[2])
                else:
                    rec["nbytes"] = nbytes(args[0])
            else:  # functional collectives: (input, ..., group_name)
                inp = args[0]
                if kind == "all_gather":
                    rec["nbytes"] = nbytes(inp) * int(args[1])
                elif kind == "all_to_all":
                    in_splits = args[2]  # (input, output_splits, input_splits, group)
                    rec["nbytes"] = nbytes(inp)
                    rows = inp.shape[0]
                    row = nbytes(inp) // max(rows, 1)
                    own = in_splits[me] if in_splits else rows // n
                    rec["own_bytes"] = own * row
                    rec["splits"] = list(in_splits) if in_splits else []
                else:
                    rec["nbytes"] = nbytes(inp)
            ctx.records.append(rec)

    return Recorder()


def _counts(mode: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in mode.get_comm_counts().items()}


# --- a tiny Llama block --------------------------------------------------------------------


def _llama_block(d: int, heads: int, kv_heads: int, ffn: int, fused: bool = False,
                 shards: int = 1, selective: bool = False) -> Any:
    """A Llama block: RMSNorm, GQA attention (causal), RMSNorm, gated SiLU MLP, residuals.

    ``fused=True`` builds Megatron's layout: one ``wqkv`` matrix and one ``w13`` (gate and
    up), their output rows ordered in ``shards`` blocks of [q heads, k heads, v heads] and
    [gate, up], so that a column split over ``shards`` GPUs gives each GPU whole heads and
    matching gate/up columns.  The forward reads the block count from the width it gets, so
    the same module runs whole (the reference) or split by DTensor.  ``selective=True``
    checkpoints the attention core (softmax(QKᵀ)V): it is recomputed in the backward.
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    hd = d // heads

    class RMSNorm(nn.Module):
        def __init__(self, d: int):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))

        def forward(self, x):  # noqa: ANN001
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            if fused:
                self.wqkv = nn.Linear(d, (heads + 2 * kv_heads) * hd, bias=False)
            else:
                self.wq = nn.Linear(d, heads * hd, bias=False)
                self.wk = nn.Linear(d, kv_heads * hd, bias=False)
                self.wv = nn.Linear(d, kv_heads * hd, bias=False)
            self.wo = nn.Linear(heads * hd, d, bias=False)

        def forward(self, x):  # noqa: ANN001
            b, t = x.shape[0], x.shape[1]
            if fused:
                nq, nk = heads // shards, kv_heads // shards  # heads per block
                out = self.wqkv(x)
                blocks = out.shape[-1] // ((nq + 2 * nk) * hd)
                out = out.view(b, t, blocks, nq + 2 * nk, hd)
                q = out[:, :, :, :nq].reshape(b, t, blocks * nq, hd)
                k = out[:, :, :, nq:nq + nk].reshape(b, t, blocks * nk, hd)
                v = out[:, :, :, nq + nk:].reshape(b, t, blocks * nk, hd)
                q, k, v = (z.transpose(1, 2) for z in (q, k, v))
            else:
                q = self.wq(x).view(b, t, -1, hd).transpose(1, 2)  # local heads
                k = self.wk(x).view(b, t, -1, hd).transpose(1, 2)
                v = self.wv(x).view(b, t, -1, hd).transpose(1, 2)
            rep = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            if selective:
                from torch.utils.checkpoint import checkpoint

                o = checkpoint(F.scaled_dot_product_attention, q, k, v, is_causal=True,
                               use_reentrant=False)
            else:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(b, t, -1))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            if fused:
                self.w13 = nn.Linear(d, 2 * ffn, bias=False)
            else:
                self.w1 = nn.Linear(d, ffn, bias=False)
                self.w3 = nn.Linear(d, ffn, bias=False)
            self.w2 = nn.Linear(ffn, d, bias=False)

        def forward(self, x):  # noqa: ANN001
            if fused:
                f = ffn // shards
                out = self.w13(x)
                blocks = out.shape[-1] // (2 * f)
                out = out.view(*out.shape[:-1], blocks, 2, f)
                gate = out[..., 0, :].flatten(-2)
                up = out[..., 1, :].flatten(-2)
                return self.w2(F.silu(gate) * up)
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm = RMSNorm(d)
            self.attention = Attention()
            self.ffn_norm = RMSNorm(d)
            self.feed_forward = MLP()

        def forward(self, x):  # noqa: ANN001
            h = x + self.attention(self.attention_norm(x))
            return h + self.feed_forward(self.ffn_norm(h))

    return Block()


def _close(a: Any, b: Any) -> float:
    return float((a - b).abs().max())


def _run_collectives(ctx: _Ctx, numel: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    n, r = ctx.world, ctx.rank
    ok = {}
    with ctx.mode() as mode:
        ctx.phase = "all_reduce"
        x = torch.full((numel,), float(r + 1))
        dist.all_reduce(x)
        ok["all_reduce"] = bool(torch.all(x == n * (n + 1) / 2))
        ctx.phase = "all_gather"
        out = torch.empty(numel)
        dist.all_gather_into_tensor(out, torch.full((numel // n,), float(r)))
        ok["all_gather"] = bool(torch.equal(out, torch.arange(n).repeat_interleave(numel // n)
                                            .float()))
        ctx.phase = "reduce_scatter"
        rs = torch.empty(numel // n)
        dist.reduce_scatter_tensor(rs, torch.arange(numel, dtype=torch.float32))
        want = n * torch.arange(r * numel // n, (r + 1) * numel // n, dtype=torch.float32)
        ok["reduce_scatter"] = bool(torch.equal(rs, want))
        ctx.phase = "all_to_all"
        a2a = torch.empty(numel)
        dist.all_to_all_single(a2a, torch.full((numel,), float(r)))
        ok["all_to_all"] = bool(torch.equal(a2a, torch.arange(n).repeat_interleave(numel // n)
                                            .float()))
        ctx.phase = "send_recv"
        buf = torch.empty(numel)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((numel,), float(r)),
                                                  (r + 1) % n),
                                       dist.P2POp(dist.irecv, buf, (r - 1) % n)])
        for q in reqs:
            q.wait()
        ok["send_recv"] = bool(torch.all(buf == (r - 1) % n))
    return {"ok": ok, "comm_counts": _counts(mode)}


def _wchar() -> int:
    """Bytes this process has written so far (all its threads): ``wchar`` of /proc/self/io."""
    with open("/proc/self/io", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise OSError("/proc/self/io has no wchar line")


def _wchar_or_none() -> int | None:
    try:
        return _wchar()
    except OSError:
        return None


def _wchar_since(before: int | None) -> int | None:
    """Bytes written since ``before`` (a :func:`_wchar_or_none`), None without /proc/self/io."""
    after = _wchar_or_none()
    return None if before is None or after is None else after - before


def _run_wire(ctx: _Ctx, numels: list[int], groups: list[int]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    try:
        _wchar()
    except OSError as err:  # the same machine for every rank: all return here, none waits
        return {"wire": [], "io_error": f"/proc/self/io 读不出（只有 Linux 有）：{err}"}
    r = ctx.rank
    out = []

    def one(kind: str, numel: int, k: int, group: Any) -> None:
        x = torch.ones(numel)
        y = torch.empty(numel)
        if kind == "all_reduce":
            dist.all_reduce(x, group=group)
        elif kind == "all_gather":  # V = the gathered output
            dist.all_gather_into_tensor(y, x[:numel // k], group=group)
        elif kind == "reduce_scatter":  # V = each rank's input
            dist.reduce_scatter_tensor(y[:numel // k], x, group=group)
        elif kind == "all_to_all":
            dist.all_to_all_single(y, x, group=group)
        else:  # a ring of send/recv: V sent to the next rank, V received from the previous
            _p2p([("send", x, (r + 1) % k), ("recv", y, (r - 1) % k)], group)

    kinds = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send")
    for k in groups:
        # every rank takes part in creating a subgroup; its members are ranks 0 .. k-1
        group = None if k == ctx.world else dist.new_group(list(range(k)))
        if r < k:
            for kind in kinds:  # warm up: connections, first-call work, off the meter
                one(kind, 4 * k, k, group)
            for numel in numels:
                for kind in kinds:
                    dist.barrier(group=group)
                    before = _wchar()
                    one(kind, numel, k, group)
                    after = _wchar()
                    out.append({"kind": kind, "group": k, "nbytes": numel * 4,
                                "wchar": after - before})
        dist.barrier()
    return {"wire": out}


def _phase(ctx: _Ctx, name: str) -> Any:
    """A context manager that labels what runs inside it with phase ``name``."""
    import contextlib

    @contextlib.contextmanager
    def cm() -> Any:
        old, ctx.phase = ctx.phase, name
        try:
            yield
        finally:
            ctx.phase = old

    return cm()


def _run_tp_block(ctx: _Ctx, d: int, heads: int, kv_heads: int, ffn: int, batch: int, seq: int,
                  sp: bool, fused: bool, prepare_input: bool, recompute: str,
                  early_stop: bool) -> dict[str, Any]:
    import copy

    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    n, r = ctx.world, ctx.rank
    torch.manual_seed(0)
    ref = _llama_block(d, heads, kv_heads, ffn, fused=fused, shards=n,
                       selective=recompute == "selective")
    block = copy.deepcopy(ref)
    x_full = torch.randn(batch, seq, d)
    # the reference: the whole block on this rank, no communication
    xr = x_full.clone().requires_grad_(True)
    yr = ref(xr)
    yr.pow(2).sum().backward()

    mesh = init_device_mesh("cpu", (n,))
    cols = (["attention.wqkv", "feed_forward.w13"] if fused else
            ["attention.wq", "attention.wk", "attention.wv", "feed_forward.w1",
             "feed_forward.w3"])
    plan: dict[str, Any] = {c: ColwiseParallel() for c in cols}
    for row in ("attention.wo", "feed_forward.w2"):
        plan[row] = RowwiseParallel(output_layouts=Shard(1)) if sp else RowwiseParallel()
    if sp:
        plan.update({
            "attention_norm": SequenceParallel(), "ffn_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1),),
                                            desired_input_layouts=(Replicate(),)),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
        })
    elif prepare_input:
        # torchtitan's plan: the block's input enters attention and the MLP as one replicated
        # DTensor, so the input gradients of the column-split matrices add up locally (a
        # Partial DTensor) and are all-reduced once per sub-block, fused or not
        plan.update({
            part: PrepareModuleInput(input_layouts=(Replicate(),),
                                     desired_input_layouts=(Replicate(),))
            for part in ("attention", "feed_forward")
        })
    with ctx.mode():
        ctx.phase = "setup"
        parallelize_module(block, mesh, plan)
    local_params = sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel()
                       for p in block.parameters())
    chunk = seq // n
    x = (x_full[:, r * chunk:(r + 1) * chunk] if sp else x_full).clone().requires_grad_(True)
    opt = torch.optim.SGD(block.parameters(), lr=0.0)
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

    with ctx.mode(debug=True) as mode, set_checkpoint_early_stop(early_stop):
        ctx.phase = "forward"
        if recompute == "full":
            # the block's forward runs again inside the backward: label it "recompute"
            y = checkpoint(block, x, use_reentrant=False,
                           context_fn=lambda: (_phase(ctx, "forward"), _phase(ctx, "recompute")))
        else:
            y = block(x)
        ctx.phase = "backward"
        loss = y.pow(2).sum()
        loss.backward()
        # with sequence parallelism the norms' gradients are partial sums (each rank saw
        # its own tokens): the optimizer step reduces them
        ctx.phase = "step"
        opt.step()
    want_y = yr[:, r * chunk:(r + 1) * chunk] if sp else yr
    want_g = xr.grad[:, r * chunk:(r + 1) * chunk] if sp else xr.grad
    y_local = y.to_local() if hasattr(y, "to_local") else y
    return {"comm_counts": _counts(mode), "local_params": int(local_params),
            "max_err_output": _close(y_local.detach(), want_y.detach()),
            "max_err_input_grad": _close(x.grad, want_g)}


def _dp_reference(n: int, d: int, heads: int, kv_heads: int, ffn: int, batch: int, seq: int,
                  layers: int, micro_batches: int) -> tuple[Any, Any, Any]:
    """For the data-parallel scenarios: a stack of ``layers`` Llama blocks, a copy of it to
    shard or wrap, and every rank's micro-batches ``data[rank, j]``; the reference has run
    them all, so its grads are the sum over ranks and micro-batches."""
    import copy

    import torch
    from torch import nn

    torch.manual_seed(0)
    ref = nn.Sequential(*[_llama_block(d, heads, kv_heads, ffn) for _ in range(layers)])
    model = copy.deepcopy(ref)
    data = torch.randn(n, micro_batches, batch, seq, d)
    for i in range(n):
        for j in range(micro_batches):
            ref(data[i, j]).pow(2).sum().backward()
    return ref, model, data


def _run_fsdp(ctx: _Ctx, d: int, heads: int, kv_heads: int, ffn: int, batch: int, seq: int,
              layers: int, micro_batches: int, reshard_after_forward: bool,
              accumulate_unsharded: bool) -> dict[str, Any]:

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    n, r = ctx.world, ctx.rank
    ref, model, data = _dp_reference(n, d, heads, kv_heads, ffn, batch, seq, layers, micro_batches)
    mesh = init_device_mesh("cpu", (n,))
    with ctx.mode():
        ctx.phase = "setup"
        for blk in model:
            fully_shard(blk, mesh=mesh, reshard_after_forward=reshard_after_forward)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    local = sum(p.to_local().numel() for p in model.parameters())
    # CommDebugMode's module tracker raises IndexError (_fw_set_module_hook) inside these
    # FSDP2-wrapped blocks in torch 2.13, so this scenario counts with the plain recorder
    wrote = _wchar_or_none()
    with ctx.mode() as mode:
        for j in range(micro_batches):
            if accumulate_unsharded:  # FSDP2's no_sync: sync and reshard after the last only
                last = j == micro_batches - 1
                model.set_requires_gradient_sync(last)
                model.set_reshard_after_backward(last)
            ctx.phase = "forward"
            out = model(data[r, j])
            ctx.phase = "backward"
            out.pow(2).sum().backward()
    wrote = _wchar_since(wrote)
    err = 0.0
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        g = p.grad.to_local()
        rows = q.shape[0] // n
        want = q.grad[r * rows:(r + 1) * rows] / n  # FSDP averages over the group
        err = max(err, _close(g, want))
    return {"comm_counts": _counts(mode), "local_params": int(local), "max_err_grad": err,
            "wchar": wrote}


def _run_ddp(ctx: _Ctx, d: int, heads: int, kv_heads: int, ffn: int, batch: int, seq: int,
             layers: int, micro_batches: int, bucket_cap_mb: float | None) -> dict[str, Any]:

    from torch.nn.parallel import DistributedDataParallel

    n, r = ctx.world, ctx.rank
    ref, model, data = _dp_reference(n, d, heads, kv_heads, ffn, batch, seq, layers, micro_batches)
    # when the backward reaches the first block, how many all-reduces are already on their way?
    seen: list[int] = []

    def at_first_block(module: Any, grad_output: Any) -> None:
        seen.append(sum(1 for rec in ctx.records
                        if rec["kind"] == "all_reduce" and rec["phase"] == "backward"))

    model[0].register_full_backward_pre_hook(at_first_block)
    with ctx.mode():
        ctx.phase = "setup"  # DDP broadcasts rank 0's weights: not part of a step
        ddp = DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
        # DDP's first step puts every gradient in one bucket; the next forward rebuilds the
        # buckets (of bucket_cap_mb each) in the order the gradients arrived, and broadcasts
        # rank 0's assignment: two warm-up steps
        for _ in range(2):
            ddp(data[r, 0]).pow(2).sum().backward()
        model.zero_grad(set_to_none=True)
        seen.clear()
    import contextlib

    wrote = _wchar_or_none()
    with ctx.mode() as mode:
        for j in range(micro_batches):
            sync = j == micro_batches - 1  # accumulate locally, all-reduce after the last
            with contextlib.nullcontext() if sync else ddp.no_sync():
                ctx.phase = "forward"
                out = ddp(data[r, j])
                ctx.phase = "backward"
                out.pow(2).sum().backward()
    wrote = _wchar_since(wrote)
    err = 0.0
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        err = max(err, _close(p.grad, q.grad / n))  # DDP averages over the group
    return {"comm_counts": _counts(mode), "local_params": int(sum(p.numel() for p in
                                                                 model.parameters())),
            "max_err_grad": err, "launched_before_first_block": seen[-1], "wchar": wrote}


def _p2p(ops: list[tuple[str, Any, int]], group: Any = None) -> None:
    import torch.distributed as dist

    if not ops:
        return
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend if kind == "send" else dist.irecv,
                                              t, peer, group) for kind, t, peer in ops])
    for q in reqs:
        q.wait()


def _run_pipeline(ctx: _Ctx, d: int, heads: int, kv_heads: int, ffn: int, batch: int, seq: int,
                  micro_batches: int) -> dict[str, Any]:
    import torch

    pp, s, m = ctx.world, ctx.rank, micro_batches
    torch.manual_seed(0)
    blocks = [_llama_block(d, heads, kv_heads, ffn) for _ in range(pp)]
    data = torch.randn(m, batch, seq, d)
    # the reference: the whole model on this rank
    for j in range(m):
        x = data[j]
        for blk in blocks:
            x = blk(x)
        x.pow(2).sum().backward()
    want = [p.grad.clone() for p in blocks[s].parameters()]
    mine = _llama_block(d, heads, kv_heads, ffn)
    mine.load_state_dict(blocks[s].state_dict())
    first, last = s == 0, s == pp - 1
    shape = (batch, seq, d)
    inputs: dict[int, Any] = {}
    outputs: dict[int, Any] = {}
    peak = [0]  # the most micro-batches whose activations this stage held at once

    def recv_forward() -> Any:
        if first:
            return None
        buf = torch.empty(shape)
        _p2p([("recv", buf, s - 1)])
        return buf

    def forward(j: int, x: Any) -> Any:
        x = data[j] if first else x
        x = x.clone().requires_grad_(not first)
        inputs[j] = x
        y = mine(x)
        outputs[j] = y
        peak[0] = max(peak[0], len(outputs))
        return y

    def backward(j: int, g: Any) -> Any:
        y = outputs.pop(j)
        if last:
            y.pow(2).sum().backward()
        else:
            y.backward(g)
        x = inputs.pop(j)
        return None if first else x.grad

    warmup = min(pp - s - 1, m)
    rest = m - warmup
    with ctx.mode() as mode:
        ctx.phase = "forward"
        for j in range(warmup):
            y = forward(j, recv_forward())
            ctx.phase = "forward"
            _p2p([("send", y.detach(), s + 1)])
        x = recv_forward() if rest else None
        for i in range(rest):
            j = warmup + i
            ctx.phase = "forward"
            y = forward(j, x)
            g = None
            if not last:
                g = torch.empty(shape)
                _p2p([("send", y.detach(), s + 1), ("recv", g, s + 1)])
            ctx.phase = "backward"
            gx = backward(i, g)
            if i == rest - 1:
                if not first:
                    _p2p([("send", gx, s - 1)])
            else:
                if first:
                    x = None
                else:
                    x = torch.empty(shape)
                    _p2p([("send", gx, s - 1), ("recv", x, s - 1)])
        for i in range(rest, m):
            ctx.phase = "backward"
            g = torch.empty(shape)
            if not last:
                _p2p([("recv", g, s + 1)])
            gx = backward(i, g)
            if not first:
                _p2p([("send", gx, s - 1)])
    err = max(_close(p.grad, w) for p, w in zip(mine.parameters(), want, strict=True))
    return {"comm_counts": _counts(mode), "max_err_grad": err, "stage": s,
            "max_in_flight": peak[0]}


def _run_moe(ctx: _Ctx, d: int, ffn: int, experts: int, k: int, tokens: int,
             routing: str) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.nn.functional import all_to_all_single

    n, r = ctx.world, ctx.rank
    per = experts // n
    torch.manual_seed(0)
    w1 = [nn.Linear(d, ffn, bias=False) for _ in range(experts)]
    w2 = [nn.Linear(ffn, d, bias=False) for _ in range(experts)]
    router = nn.Linear(d, experts, bias=False)
    xs = torch.randn(n, tokens, d)

    def expert(e: int, h: Any) -> Any:
        return w2[e](F.silu(w1[e](h)))

    def route(x: Any) -> tuple[Any, Any]:
        if routing == "uniform":
            i = torch.arange(x.shape[0])
            idx = (i[:, None] * k + torch.arange(k)[None, :]) % experts
            gates = torch.softmax(router(x), -1).gather(1, idx)
        else:
            gates, idx = torch.softmax(router(x), -1).topk(k, -1)
        return gates, idx

    # the reference: this rank's tokens through every expert locally
    xr = xs[r].clone().requires_grad_(True)
    g, idx = route(xr)
    yr = torch.zeros_like(xr)
    for j in range(k):
        for e in range(experts):
            sel = idx[:, j] == e
            if sel.any():
                yr[sel] = yr[sel] + g[sel, j, None] * expert(e, xr[sel])
    yr.pow(2).sum().backward()
    want_grad = xr.grad.clone()
    for p in [*router.parameters(), *(q for e in range(experts) for q in
                                      (*w1[e].parameters(), *w2[e].parameters()))]:
        p.grad = None

    x = xs[r].clone().requires_grad_(True)
    with ctx.mode() as mode:
        ctx.phase = "forward"
        g, idx = route(x)
        flat = idx.reshape(-1)  # copy c = token c // k, choice c % k
        order = torch.argsort(flat, stable=True)  # copies sorted by expert, so by owner rank
        send_rows = x.repeat_interleave(k, 0)[order]
        per_expert = torch.bincount(flat, minlength=experts)
        # Megatron's dispatcher first tells every rank how many rows it will get per expert
        ctx.phase = "counts"
        recv_counts = torch.empty_like(per_expert)
        dist.all_to_all_single(recv_counts, per_expert)
        ctx.phase = "forward"
        ins = per_expert.view(n, per).sum(1).tolist()
        outs = recv_counts.view(n, per).sum(1).tolist()
        recv = all_to_all_single(torch.empty(sum(outs), d), send_rows, outs, ins)
        # received rows come by source rank, then by local expert
        local_ids = torch.arange(r * per, (r + 1) * per).repeat(n)
        eid = torch.repeat_interleave(local_ids, recv_counts)
        h = torch.zeros_like(recv)
        for e in range(r * per, (r + 1) * per):
            sel = eid == e
            if sel.any():
                h = h.index_add(0, sel.nonzero().squeeze(1), expert(e, recv[sel]))
        back = all_to_all_single(torch.empty(sum(ins), d), h, ins, outs)
        y_copies = torch.empty_like(back).index_copy(0, order, back)
        y = (y_copies.view(-1, k, d) * g[..., None]).sum(1)
        ctx.phase = "backward"
        y.pow(2).sum().backward()
    return {"comm_counts": _counts(mode), "max_err_output": _close(y.detach(), yr.detach()),
            "max_err_input_grad": _close(x.grad, want_grad), "in_splits": ins,
            "out_splits": outs}


def _run_ring_attention(ctx: _Ctx, batch: int, heads: int, kv_heads: int, head_dim: int,
                        seq: int, causal: bool, backward: bool = False,
                        kv_dtype: str = "fp32") -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    n, r = ctx.world, ctx.rank
    torch.manual_seed(0)
    wire = {"fp32": torch.float32, "bf16": torch.bfloat16}[kv_dtype]
    q = torch.randn(batch, heads, seq, head_dim)
    # K and V travel in kv_dtype; the reference attends to the same (rounded) values in fp32
    k = torch.randn(batch, kv_heads, seq, head_dim).to(wire).float()
    v = torch.randn(batch, kv_heads, seq, head_dim).to(wire).float()
    d_out = torch.randn(batch, heads, seq, head_dim)  # the loss's gradient w.r.t. the output
    rep = heads // kv_heads
    qr, kr, vr = (t.clone().requires_grad_(backward) for t in (q, k, v))
    full = F.scaled_dot_product_attention(qr, kr.repeat_interleave(rep, 1),
                                          vr.repeat_interleave(rep, 1), is_causal=causal)
    if backward:
        full.backward(d_out)
    c = seq // n
    mine = slice(r * c, (r + 1) * c)
    ql, dol = q[:, :, mine], d_out[:, :, mine]
    kv = torch.stack([k[:, :, mine], v[:, :, mine]]).to(wire)  # one message
    own_kv = kv
    scale = head_dim ** -0.5
    m_run = torch.full((batch, heads, c, 1), float("-inf"))
    l_run = torch.zeros(batch, heads, c, 1)
    acc = torch.zeros(batch, heads, c, head_dim)
    pos_q = torch.arange(r * c, (r + 1) * c)

    def scores(src: int, kb: Any) -> Any:
        s_ = ql @ kb.transpose(-1, -2) * scale
        if causal:
            pos_k = torch.arange(src * c, (src + 1) * c)
            s_ = s_.masked_fill(pos_k[None, :] > pos_q[:, None], float("-inf"))
        return s_

    def widen(t: Any) -> Any:  # a KV head serves rep query heads
        return t.float().repeat_interleave(rep, 1)

    def narrow(t: Any) -> Any:  # the gradient of a repeated KV head: the sum over its rep
        return t.reshape(batch, kv_heads, rep, c, head_dim).sum(2)

    io = {"forward": None, "backward": None}
    import torch.distributed as dist

    with ctx.mode() as mode:
        ctx.phase = "setup"  # the barriers: every rank starts its meter at once
        dist.barrier()
        ctx.phase = "forward"
        before = _wchar_or_none()
        for step in range(n):
            src = (r - step) % n  # whose K, V this rank holds now
            kb, vb = (widen(t) for t in kv)
            s_ = scores(src, kb)
            m_new = torch.maximum(m_run, s_.amax(-1, keepdim=True))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s_ - safe)
            corr = torch.exp(torch.where(torch.isinf(m_run), torch.full_like(m_run, -1e30),
                                         m_run - safe))
            l_run = l_run * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + p @ vb
            m_run = m_new
            if step < n - 1:  # pass K, V on: send ours to the next rank, receive the previous
                nxt = torch.empty_like(kv)
                _p2p([("send", kv, (r + 1) % n), ("recv", nxt, (r - 1) % n)])
                kv = nxt
        io["forward"] = _wchar_since(before)
        out = acc / l_run
        if backward:
            # ring-flash-attention's backward: K, V go round again (n - 1 hops); each block's
            # dK, dV are accumulated in fp32 on the way and travel on with the K, V they belong
            # to, so after n hops (one more than K, V) they are back at their owner
            ctx.phase = "backward"
            lse = m_run + torch.log(l_run)
            delta = (dol * out).sum(-1, keepdim=True)  # δ_i = dO_i · O_i: no ring needed
            dq = torch.zeros_like(ql)
            kv, dkv = own_kv, None
            ctx.phase = "setup"
            dist.barrier()
            ctx.phase = "backward"
            before = _wchar_or_none()
            for step in range(n):
                src = (r - step) % n
                kb, vb = (widen(t) for t in kv)
                p = torch.exp(scores(src, kb) - lse)  # masked entries: exp(-inf) = 0
                dp = dol @ vb.transpose(-1, -2)
                ds = p * (dp - delta)
                dq += ds @ kb * scale
                block = torch.stack([narrow(ds.transpose(-1, -2) @ ql * scale),
                                     narrow(p.transpose(-1, -2) @ dol)])  # fp32
                dkv = block if dkv is None else dkv + block
                got = torch.empty_like(dkv)
                ops = [("send", dkv, (r + 1) % n), ("recv", got, (r - 1) % n)]
                if step < n - 1:
                    nxt = torch.empty_like(kv)
                    ops += [("send", kv, (r + 1) % n), ("recv", nxt, (r - 1) % n)]
                _p2p(ops)
                dkv = got  # the accumulator of the block this rank holds next
                if step < n - 1:
                    kv = nxt
            io["backward"] = _wchar_since(before)
    res = {"comm_counts": _counts(mode),
           "max_err_output": _close(out, full.detach()[:, :, mine]), "wchar": io}
    if backward:
        res["max_err_grad"] = max(_close(dq, qr.grad[:, :, mine]),
                                  _close(dkv[0], kr.grad[:, :, mine]),
                                  _close(dkv[1], vr.grad[:, :, mine]))
    return res


_RUNNERS = {
    "collectives": _run_collectives,
    "wire": _run_wire,
    "tp_block": _run_tp_block,
    "ddp": _run_ddp,
    "fsdp": _run_fsdp,
    "pipeline": _run_pipeline,
    "moe": _run_moe,
    "ring_attention": _run_ring_attention,
}
