"""The grader's worker: runs one handed-in notebook, inside the sandbox (:mod:`tmath.sandbox`).

``python _grade_worker.py BUDGET NAME [CELL]`` reads the notebook from standard input, writes it
to ``NAME`` in the current folder (the sandbox's scratch folder), runs it from the top in a new
kernel of this Python (``python3``, whatever kernel the notebook names), its saved outputs
cleared first, errors allowed, the history in memory, and ``BUDGET`` seconds for the cells,
counted from the moment the kernel answers (:data:`KERNEL_START_SECONDS` more for the kernel
to start). One cell may take at most ``CELL`` seconds (default: the whole budget): then the
kernel is interrupted, the cell gets an error output that says so, and the cells after it run
as usual, so an infinite loop in one cell costs only that cell, not every answer after it (a
kernel that ignores the interrupt keeps the next cells waiting until the budget is spent). It
writes to standard output one line of JSON, the status (``ok``, ``timeout`` with the cell,
``dead``, ``failed`` with a detail; ``interrupted``: the cells stopped at their limit), then the
executed notebook.

The grader runs this file as it is (bound read-only into the sandbox) with the course kit's
Python: it imports nothing from tmath, only the standard library, nbformat and nbclient,
which the kit's JupyterLab requires. Everything it writes is the student's to forge (the
kernel runs with its rights): the grader reads it as untrusted data, never runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

#: How long a notebook's kernel may take to start, outside its budget (nbclient's own
#: default is 60 s: a kernel started beside a dozen others on two cores can take longer).
KERNEL_START_SECONDS = 300


def unix_sockets(folder: str) -> dict[str, str]:
    """A kernel manager's settings for a kernel listening on Unix sockets in ``folder`` (no TCP
    port that another program could take first: see :mod:`tmath.grade`); none, so TCP,
    where there are no Unix sockets, or where ``folder`` is so deep that a socket's path would
    pass the 104 bytes some systems allow (macOS)."""
    ip = os.path.join(folder, "kernel")
    if os.name != "posix" or len(os.fsencode(ip)) + len("-5") >= 104:
        return {}
    return {"transport": "ipc", "ip": ip}


def kernel_manager(folder: str, kernel_name: str = "python3"):
    """nbclient's kind of kernel manager (asynchronous: a synchronous one blocks nbclient's
    event loop while it waits for output, and a cell's timeout never fires), on
    :func:`unix_sockets` in ``folder``."""
    from jupyter_client.manager import AsyncKernelManager

    return AsyncKernelManager(kernel_name=kernel_name, **unix_sockets(folder))


#: pip in the kernel fails at once, without a look at any index (the setup cell of a PyTorch
#: chapter runs ``%pip install torch`` where torch is missing): grading installs nothing, and
#: has no network to install from anyway. A kit venv built with ``make grading-env TORCH=1``
#: has torch, and the setup cell installs nothing.
OFFLINE_PIP = {"PIP_NO_INDEX": "1", "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

#: The error output a cell stopped at its time limit gets (what the student's feedback names).
CELL_TIMEOUT_NAME = "单元格超时"


def run(nb, budget: float, folder: str, cell_limit: float | None = None) -> dict:
    """Execute ``nb`` (in place) in ``folder``; returns the status."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbformat.v4 import new_output

    for cell in nb.cells:  # nothing saved by the student counts: only what runs here
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    cell_limit = budget if cell_limit is None else min(cell_limit, budget)
    deadline = float("inf")  # set once the kernel answers: the budget is the cells'
    sockets = tempfile.mkdtemp(prefix="tmath-kernel-")
    stopped = f"运行超过 {cell_limit:g} 秒，已中断"
    client = NotebookClient(
        nb, km=kernel_manager(sockets), allow_errors=True, interrupt_on_timeout=True,
        error_on_timeout={"ename": CELL_TIMEOUT_NAME, "evalue": stopped, "traceback": []},
        startup_timeout=KERNEL_START_SECONDS,
        timeout_func=lambda cell: max(0.1, min(cell_limit, deadline - time.monotonic())),
        extra_arguments=["--HistoryManager.hist_file=:memory:"],
        resources={"metadata": {"path": folder}},
    )
    status: dict = {"status": "ok"}
    interrupted: list[int] = []
    index = 0
    saved = {name: os.environ.get(name) for name in OFFLINE_PIP}
    os.environ.update(OFFLINE_PIP)  # the kernel inherits this process's environment
    try:
        with client.setup_kernel():
            deadline = time.monotonic() + budget
            for index, cell in enumerate(nb.cells):
                if time.monotonic() >= deadline:
                    raise CellTimeoutError(f"budget of {budget} s spent before cell {index + 1}")
                started = time.monotonic()
                client.execute_cell(cell, index)
                if cell.cell_type != "code":
                    continue
                if time.monotonic() >= deadline:  # the budget ran out in this cell
                    raise CellTimeoutError(f"budget of {budget} s spent in cell {index + 1}")
                if time.monotonic() - started >= cell_limit:
                    interrupted.append(index + 1)
                    # the kernel's KeyboardInterrupt is the limit, not the student's error
                    outputs = cell.get("outputs", [])
                    cell.outputs = [o for o in outputs if o.get("ename") != "KeyboardInterrupt"]
                    cell.outputs.append(new_output("error", ename=CELL_TIMEOUT_NAME, evalue=stopped,
                                                   traceback=[]))
    except CellTimeoutError:
        status = {"status": "timeout", "cell": index + 1}
        # the kernel was stopped in this cell: its KeyboardInterrupt is the timeout, not an error
        cell = nb.cells[index]
        cell.outputs = [o for o in cell.get("outputs", []) if o.get("ename") != "KeyboardInterrupt"]
    except DeadKernelError:
        status = {"status": "dead"}
    except Exception as e:  # noqa: BLE001 - reported in the student's row, never raised
        status = {"status": "failed", "detail": f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if interrupted:
        status["interrupted"] = interrupted
    shutil.rmtree(sockets, ignore_errors=True)
    return status


def undumpable() -> bool:
    """Make this process one that no other process of its user may inspect or take apart
    (``prctl(PR_SET_DUMPABLE, 0)``): the kernel runs as this process's user, and without this it
    took this process's output pipe (``pidfd_getfd``) and wrote the grader a forged executed
    notebook. Not dumpable, the process's ``/proc/PID/fd``, ``mem`` and ``environ``, ptrace and
    ``pidfd_getfd`` need ``CAP_SYS_PTRACE``, which nothing in the sandbox has; an ``exec`` makes
    a process dumpable again, so the kernel this process starts is not protected (it needs no
    protection: it is the student's). False where there is no ``prctl`` (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    pr_set_dumpable = 4
    return ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0) == 0


def main(argv: list[str]) -> int:
    import nbformat

    if not undumpable() and sys.platform.startswith("linux"):
        raise SystemExit("prctl(PR_SET_DUMPABLE, 0) failed: the kernel could take this process's output")
    budget, name = float(argv[0]), Path(argv[1]).name
    cell_limit = float(argv[2]) if len(argv) > 2 else None
    # The answer goes to the grader on this process's own standard output, which nothing it
    # starts inherits: the kernel's goes to /dev/null (its standard error, like this
    # process's, to the grader, which keeps the last lines).
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    src = Path.cwd() / name
    src.write_bytes(sys.stdin.buffer.read())
    nb = nbformat.read(src, as_version=4)
    status = run(nb, budget, str(src.parent), cell_limit)
    out.write(json.dumps(status) + "\n")
    out.write(nbformat.writes(nb))
    out.close()
    return 0


if __name__ == "__main__":
    # nbformat imports jsonschema, which builds an IRI grammar (lark) at import when
    # rfc3987_syntax is installed: about 1.5 s in every worker, for the "iri" format, which
    # nbformat's schema (JSON Schema draft 4) does not have. This process only runs notebooks.
    sys.modules.setdefault("rfc3987_syntax", None)
    sys.exit(main(sys.argv[1:]))
