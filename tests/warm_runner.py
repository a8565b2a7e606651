"""Run notebooks' code cells in fresh IPython shells, paying the heavy imports once.

A Jupyter kernel that starts, imports NumPy, SymPy, matplotlib and tmath, runs a notebook and
exits spends more time starting than running a light chapter. This runner imports those
libraries once, then gives each notebook a new process (``os.fork``) with a new IPython shell:
an empty user namespace, no variable of any earlier notebook, so a cell that uses a name the
program never defined fails with the ``NameError`` a reader would get. What it does not give
is a clean ``sys.modules``: a library a cell forgets to import is loaded but not bound, which
is the same thing for a reader's code (its names still fail). Each child runs with
matplotlib's Agg backend, in the notebook's folder, its output thrown away; a cell tagged
``raises-exception`` may raise and ``skip-execution`` cells are skipped, as with nbval.

Which cells form the program:

* ``visible``: the setup cell, then every code cell the page shows (not tagged
  ``remove-cell`` or ``remove-input``), solutions included: what a reader can copy.
* ``all``: every code cell, in order: what a student's copy of a notebook runs.

Two ways to use it (stdlib, nbformat and IPython only, so any venv of the book can run it):

* ``python warm_runner.py --mode all --jobs 2 NB.ipynb ...`` runs the notebooks, two at a time,
  and prints one JSON line per notebook: ``{"path", "ok", "error", "seconds"}``.
* ``python warm_runner.py --serve``: reads ``MODE PATH`` lines on stdin and answers each with
  that JSON line (the test suite keeps one such server per pytest worker).

The server also starts Jupyter kernels for nbval: a line ``kernel {"argv", "cwd", "env"}``
(the command, folder and environment jupyter_client would launch ``python -m
ipykernel_launcher -f CONNECTION_FILE`` with) forks a child that becomes that kernel, in its
own session, with that folder and environment, and the answer is ``{"pid": N}``. The child
is what the launcher would be, minus the imports it would repeat: the runner's folder is
dropped from ``sys.path`` (a kernel never has it), matplotlib's backend is the kernel's
(inline, unless the environment names one), and it exits when the kernel does. The root
``conftest.py`` hands the kernel to nbval (``WarmProvisioner``); nbval then talks to it over
ZeroMQ as to any kernel, and compares every output with the saved one as before.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback

HIDDEN_TAGS = frozenset({"remove-cell", "remove-input"})
SETUP_HEADER = "# Setup (hidden on the website)"  # scripts/setup_cells.py's HEADER
WARM = ("numpy", "sympy", "matplotlib", "matplotlib.pyplot", "IPython", "nbformat", "tmath",
        "tmath.plots", "tmath.fmt", "tmath.nb", "myst_nb", "ipykernel.kernelapp",
        # three chapters run PyTorch and transformers in the kernel (crosscheck, memory,
        # when-6pt-fails), twice each: ~9 s of imports a run, ~10 s once here
        "torch", "transformers", "transformers.models.auto.modeling_auto")
#: The backend ipykernel gives a kernel whose environment names none.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
HERE = os.path.dirname(os.path.abspath(__file__))


def warm_up() -> None:
    """Import what the chapters import, before any fork (each child inherits it)."""
    import importlib

    os.environ.setdefault("MPLBACKEND", "Agg")
    # nbformat imports jsonschema, which builds an IRI grammar (lark) at import when
    # rfc3987_syntax is installed: 1.1 s, for the "iri" format that nbformat's schema (JSON
    # Schema draft 4) does not have. Blocked here, as in tmath grade's child; neither the
    # notebook runs nor the kernels forked from here validate IRIs.
    sys.modules.setdefault("rfc3987_syntax", None)
    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a venv without it (the course kit has no myst_nb? then the chapters say so)


def program(path: str, mode: str) -> list[tuple[str, set[str]]]:
    """``(source, tags)`` of the code cells ``mode`` runs, in order."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        if "skip-execution" in tags:
            continue
        if mode == "all" or cell.source.startswith(SETUP_HEADER) or not tags & HIDDEN_TAGS:
            cells.append((cell.source, tags))
    return cells


def _run_in_child(path: str, mode: str, report: int) -> None:
    """In the forked child: run the program, write the outcome to the pipe ``report``, exit."""
    outcome = {"path": path, "ok": True, "error": ""}
    path = os.path.abspath(path)
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.chdir(os.path.dirname(os.path.abspath(path)))
        cells = program(path, mode)
        from IPython.core.interactiveshell import InteractiveShell

        shell = InteractiveShell.instance(history_length=0, hist_file=":memory:", colors="NoColor")
        shell.user_ns["__name__"] = "__main__"
        for i, (source, tags) in enumerate(cells):
            result = shell.run_cell(source, store_history=False, silent=False)
            error = result.error_before_exec or result.error_in_exec
            if error is not None and "raises-exception" not in tags:
                tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
                where = f"cell {i + 1} of {len(cells)} ({mode})"
                outcome = {"path": path, "ok": False,
                           "error": f"{where}:\n{source[:1500]}\n\n{tb[-3000:]}"}
                break
    except BaseException as e:  # noqa: BLE001 - report anything, never hang the parent
        outcome = {"path": path, "ok": False, "error": "".join(traceback.format_exception(e))[-4000:]}
    data = json.dumps(outcome).encode()
    os.write(report, data)
    os.close(report)
    os._exit(0)


def start(path: str, mode: str) -> tuple[int, int, float]:
    """Fork a child that runs ``path``; returns ``(pid, read end of its pipe, start time)``."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _run_in_child(path, mode, w)
    os.close(w)
    return pid, r, time.monotonic()


def finish(pid: int, r: int, t0: float, path: str) -> dict:
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    try:
        outcome = json.loads(b"".join(chunks).decode())
    except ValueError:
        outcome = {"path": path, "ok": False,
                   "error": f"the run ended without a report (wait status {status})"}
    outcome["seconds"] = round(time.monotonic() - t0, 1)
    return outcome


def run_many(paths: list[str], mode: str, jobs: int) -> list[dict]:
    pending = list(paths)
    running: dict[int, tuple[int, float, str]] = {}
    done = []
    while pending or running:
        while pending and len(running) < jobs:
            path = pending.pop(0)
            pid, r, t0 = start(path, mode)
            running[pid] = (r, t0, path)
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if not pid:
            time.sleep(0.05)
            continue
        # the child has exited: read what it wrote (the pipe holds it), reap nothing twice
        r, t0, path = running.pop(pid)
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        os.close(r)
        try:
            outcome = json.loads(b"".join(chunks).decode())
        except ValueError:
            outcome = {"path": path, "ok": False, "error": "the run ended without a report"}
        outcome["seconds"] = round(time.monotonic() - t0, 1)
        done.append(outcome)
        print(json.dumps(outcome), flush=True)
    return done


def _become_kernel(request: dict) -> None:
    """In the forked child: become the kernel ``python -m ipykernel_launcher ARGS`` (never returns)."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server's reaper is not the kernel's
        os.setsid()  # its own process group, as jupyter_client gives a kernel it launches
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # never write into the server's pipe to pytest
            os.dup2(devnull, fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
        if "matplotlib" in sys.modules:  # imported under Agg before the fork
            import matplotlib

            matplotlib.rcParams["backend"] = os.environ.get("MPLBACKEND") or INLINE_BACKEND
        argv = request["argv"]
        args = argv[argv.index("ipykernel_launcher") + 1:]
        import ipykernel_launcher
        from ipykernel import kernelapp

        sys.argv = [ipykernel_launcher.__file__, *args]
        kernelapp.launch_new_instance(argv=args)
        code = 0
    finally:
        os._exit(code)


#: Kernels this server forked and has not reaped yet.
KERNELS: set[int] = set()


def _reap_kernels(signum, frame) -> None:
    """SIGCHLD: reap the kernels that ended (the notebook runs reap their own children)."""
    for pid in list(KERNELS):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            KERNELS.discard(pid)


def fork_kernel(request: dict) -> int:
    pid = os.fork()
    if pid == 0:
        _become_kernel(request)
    KERNELS.add(pid)
    return pid


def serve() -> None:
    signal.signal(signal.SIGCHLD, _reap_kernels)
    for line in sys.stdin:
        mode, _, arg = line.strip().partition(" ")
        if not arg:
            continue
        if mode == "kernel":
            print(json.dumps({"pid": fork_kernel(json.loads(arg))}), flush=True)
            continue
        pid, r, t0 = start(arg, mode)
        print(json.dumps(finish(pid, r, t0, arg)), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--mode", choices=("visible", "all"), default="all")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--serve", action="store_true")
    args = ap.parse_args()
    warm_up()
    if args.serve:
        serve()
        return 0
    results = run_many(args.paths, args.mode, args.jobs)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
