"""The grader's sandbox: one handed-in notebook, run where it can harm nothing else.

``tmath grade`` runs each notebook with the course kit's Python (the keyless edition) in a
sandbox made by bubblewrap (``bwrap``, Debian's package ``bubblewrap``), which Linux machines
without Docker have, CI included. The sandbox has

- **its own view of the files**: a new mount namespace whose root is an empty tmpfs holding,
  read-only, ``/usr`` (the system's programs and libraries), the kit's venv and the Python it
  was made from, and the worker script (:mod:`tmath._grade_worker`); and, writable, its
  scratch folder ``/work`` (the notebook's private copy, where it runs) and ``/tmp``, both
  tmpfs of a fixed size that vanish with the sandbox. Not mounted, so not there: the
  submissions folder, the other students, the teacher's venv and the answer keys, the
  grader's output, ``/home`` and ``/root``, ``/etc`` (but for a few files programs read);
- **its own processes**: a new PID namespace (its ``/proc`` shows only its own processes, so
  it cannot find or signal the grader); when the worker exits, or the grader kills the
  sandbox at its time limit, the kernel kills every process left in it (daemons included);
  ``--die-with-parent`` kills it if the grader dies;
- **no network**: a new network namespace with only a loopback interface, down;
- **no privileges**: as root, the sandbox's processes run as a user of their own
  (:func:`sandbox_uid`: no file of the machine is theirs) with no capabilities and
  ``no_new_privs``; as another user, in a new user namespace, as that user;
- **limits** (``prlimit``, per process): :data:`MEMORY_BYTES` of address space,
  :data:`PROCESSES` processes (threads count) for the sandbox's user, CPU seconds, the size
  of a file and the number of open files;
- **memory as a whole** (:func:`cgroups`): where the grader may make a memory cgroup (v1 as
  root, as on CI's machines; v2 where its own group delegates ``memory``), each sandbox's
  processes and tmpfs files share :data:`SANDBOX_MEMORY_BYTES` (``--memory``); elsewhere only
  the per-process limit holds (four processes of one notebook held 10 GiB);
- **the worker out of the kernel's reach**: the kernel runs as the worker's user. The worker
  is the sandbox's pid 1 (``--as-pid-1``: no reaper of bwrap's holds a copy of its output
  pipe, and signals from inside do not reach it) and not dumpable
  (:func:`tmath._grade_worker.undumpable`), so the kernel cannot take its output pipe
  (``pidfd_getfd``, ``/proc/PID/fd``) to forge the executed notebook, nor kill it;
- **no environment of the grader's**: bwrap starts with :func:`outer_env` (a normal user's
  sandbox could read bwrap's environment in ``/proc/1/environ``), its processes with what
  :func:`command` sets, ``TMATH_GRADING`` included (:data:`GRADING_ENV`);
- **a fair share of the CPU**: where the grader runs as root on cgroup v1 (CI's machines),
  each sandbox is a group of its own in the ``cpu`` and ``pids`` controllers
  (:func:`cgroups`), so that a notebook with a hundred busy processes gets as much CPU as its
  neighbour with one, and the ``pids`` group caps the sandbox's processes, whatever their
  user. Elsewhere a new session puts the sandbox in an autogroup of its own, which a process
  that starts a session of its own leaves: there, grade with ``--jobs 1`` if a neighbour's
  time limit matters.

The worker reads the notebook on its standard input and writes its result on its standard
output, which the grader reads, at most :data:`OUTPUT_BYTES` of it, as untrusted data.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: Address space of one process of the sandbox (a 10 GB allocation fails with MemoryError).
MEMORY_BYTES = 4 * 2**30
#: Processes and threads the sandbox's user may have at once (a kernel needs about 20).
PROCESSES = 128
#: Size of one file the sandbox writes, and of each of its tmpfs folders (/work, /tmp).
FILE_BYTES = 512 * 2**20
#: Open files per process.
OPEN_FILES = 1024
#: At most this much of the worker's output (the executed notebook) is read.
OUTPUT_BYTES = 64 * 2**20
#: Where the sandbox's users' ids start (as root: one per grading run's process and slot).
UID_BASE = 1_000_000_000
#: Files of /etc that programs in the sandbox read (user and host names, the loader's cache,
#: time zone); the rest of /etc is not there.
ETC = ("passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "localtime", "mime.types")

WORKER = Path(__file__).with_name("_grade_worker.py")
#: Set in the sandbox: the kit's answer cells record the answer without checking it against the
#: kit's slow hashes (``tmath.exercises.answer_record``), which the grader's check replaces (an
#: answered tour notebook took 22 to 65 s to grade, hashing). A student who sets it in the kit
#: only loses the self-check.
GRADING_ENV = {"TMATH_GRADING": "1"}


class SandboxError(Exception):
    """The sandbox cannot be made on this machine (message in Chinese)."""


def sandbox_uid(slot: int, grader: int | None = None) -> int:
    """The user id of the sandbox in slot ``slot`` of the grading run whose process is
    ``grader`` (default: this one), as root: one of its own per run and slot, so that two
    sandboxes never share the process limit."""
    return UID_BASE + ((os.getpid() if grader is None else grader) % 4_194_304) * 64 + slot


@dataclass(frozen=True)
class KitEnv:
    """The course kit's venv: its Python, and the folders a process of it reads."""

    python: Path  # venv/bin/python, as the venv names it (not resolved)
    prefix: Path  # the venv
    base_prefix: Path  # the Python it was made from

    @classmethod
    def probe(cls, venv: Path) -> KitEnv:
        """Check that ``venv`` is a course kit's venv (no answer keys; nbclient there) and
        compile the modules a worker imports (the sandbox cannot write their caches)."""
        python = venv / "bin" / "python"
        if not python.exists():
            raise SandboxError(f"--kit-env：{venv} 里没有 bin/python，不是一个 Python 虚拟环境")
        script = (
            "import importlib.util, json, sys\n"
            "import nbclient, nbformat, jupyter_client, ipykernel.kernelapp, tmath, tmath.exercises\n"
            "print(json.dumps([sys.prefix, sys.base_prefix,\n"
            "                  importlib.util.find_spec('tmath.answer_keys') is not None]))\n")
        proc = subprocess.run([str(python), "-c", script], capture_output=True, text=True,
                              env=_plain_env(), timeout=300, check=False)
        if proc.returncode != 0:
            why = proc.stderr.strip().splitlines()[-1:] or [f"退出码 {proc.returncode}"]
            raise SandboxError(f"--kit-env：{venv} 不能运行评分需要的程序"
                               f"（课程包的 tmath、nbclient、ipykernel）：{why[0]}")
        prefix, base, keys = json.loads(proc.stdout)
        if keys:
            raise SandboxError(f"--kit-env：{venv} 里的 tmath 带着答案（tmath.answer_keys），"
                               "学生的笔记本不能在这里运行：请用课程包的环境（make grading-env）")
        return cls(python, Path(prefix), Path(base))


def _plain_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/work", "PYTHONNOUSERSITE": "1"}


def bwrap() -> str:
    found = shutil.which("bwrap")
    if not found:
        raise SandboxError("找不到 bubblewrap（bwrap）：评分在它的沙箱里运行学生的笔记本。"
                           "请先安装：sudo apt-get install bubblewrap（或在本书仓库里运行 make sandbox）")
    return found


def _dirs(path: Path) -> list[str]:
    """``--dir`` for each folder above ``path``, world-searchable (bwrap copies the host's
    modes, and /root is 0700: the sandbox's user could not reach a venv under it)."""
    args = []
    for parent in reversed(path.parents):
        if str(parent) != "/":
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _v1_group_base(controller: str) -> Path | None:
    """This process's group in the cgroup-v1 hierarchy of ``controller``, if root may make
    groups in it; None elsewhere (cgroup v2, no such controller, not root)."""
    if os.geteuid() != 0:
        return None
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
        mine = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mount = None
    for line in mountinfo:
        fields = line.split()
        if "-" not in fields:
            continue
        tail = fields[fields.index("-") + 1:]
        if len(tail) >= 3 and tail[0] == "cgroup" and controller in tail[2].split(",") and fields[3] == "/":
            mount = Path(fields[4])
    for line in mine:
        _, controllers, path = line.split(":", 2)
        if mount is not None and controller in controllers.split(","):
            base = mount / path.lstrip("/")
            return base if os.access(base, os.W_OK) else None
    return None


#: The cgroup-v1 controllers a sandbox gets a group of, and what is written there (``{memory}``:
#: the sandbox's memory, :data:`SANDBOX_MEMORY_BYTES` or ``--memory``; a setting whose name ends
#: in ``?`` is written where the kernel has it: swap accounting is not always on).
CGROUPS = {"cpu": {}, "pids": {"pids.max": str(PROCESSES)},
           "memory": {"memory.limit_in_bytes": "{memory}", "memory.memsw.limit_in_bytes?": "{memory}"}}
#: The same on cgroup v2 (one group, in the controllers its parent delegates).
CGROUPS_V2 = {"pids.max": str(PROCESSES), "memory.max": "{memory}", "memory.swap.max?": "0"}
#: Memory of one sandbox as a whole: every process in it, and the files it writes to its tmpfs
#: (``--memory``). Where there is no cgroup to hold it, each process has :data:`MEMORY_BYTES`
#: of address space, and nothing bounds the sum (the README says so).
SANDBOX_MEMORY_BYTES = 4 * 2**30


def _v2_group_base() -> Path | None:
    """This process's cgroup-v2 group, if it may make groups in it whose memory and processes
    are bounded: it is writable and already delegates ``memory`` and ``pids`` to its children
    (``cgroup.subtree_control``; the grader changes no cgroup setting of the machine's). None
    elsewhere. Not exercised by the tests: the machines they run on have memory on cgroup v1."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
        mine = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mount = next((Path(f[4]) for f in map(str.split, mountinfo)
                  if "-" in f and f[f.index("-") + 1:][:1] == ["cgroup2"] and f[3] == "/"), None)
    path = next((line.split(":", 2)[2] for line in mine if line.startswith("0::")), None)
    if mount is None or path is None:
        return None
    base = mount / path.lstrip("/")
    try:
        delegated = set((base / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    return base if {"memory", "pids"} <= delegated and os.access(base, os.W_OK) else None


@contextmanager
def cgroups(slot: int, memory: int = SANDBOX_MEMORY_BYTES) -> Iterator[list[Path]]:
    """Groups of their own for one sandbox: on cgroup v1, in each controller of :data:`CGROUPS`
    where :func:`_v1_group_base` finds one; on cgroup v2, one group (:data:`CGROUPS_V2`) where
    :func:`_v2_group_base` finds where. Yields their ``cgroup.procs`` files, and removes the
    groups when the sandbox is gone. ``memory``: the bytes all the sandbox's processes may hold."""
    made = []
    wanted = [(_v1_group_base(controller), settings) for controller, settings in CGROUPS.items()]
    if not any(base is not None and "memory.limit_in_bytes" in settings for base, settings in wanted):
        wanted.append((_v2_group_base(), CGROUPS_V2))
    for base, settings in wanted:
        if base is None:
            continue
        group = base / f"tmath-grade-{os.getpid()}-{slot}"
        try:
            group.mkdir(exist_ok=True)
        except OSError:
            continue
        try:
            for key, value in settings.items():
                try:
                    (group / key.rstrip("?")).write_text(value.format(memory=memory))
                except OSError:
                    if not key.endswith("?"):
                        raise
        except OSError:  # a group without its limit is no use: gone at once
            try:
                group.rmdir()
            except OSError:
                pass
            continue
        made.append(group)
    try:
        yield [group / "cgroup.procs" for group in made]
    finally:
        for group in made:  # its last processes may still be exiting: rmdir fails until they are gone
            for _ in range(100):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


#: Puts itself into the cgroups named by its first arguments (their number first), then runs the
#: rest: the sandbox's first process is in its groups before it starts another.
JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'


def command(kit: KitEnv, slot: int, budget: float, name: str, cpu_seconds: int,
            program: list[str] | None = None, groups: list[Path] = ()) -> list[str]:
    """The command that runs the worker on one notebook (or ``program``) in a new sandbox, in
    the cgroups whose ``cgroup.procs`` files are ``groups``."""
    root = os.geteuid() == 0
    size = str(FILE_BYTES)
    join = ["/bin/sh", "-c", JOIN, "sh", str(len(groups)), *map(str, groups)] if groups else []
    # --as-pid-1: the program (the worker) is the sandbox's pid 1, not a reaper of bwrap's that
    # would hold the worker's standard output too (as a normal user, the kernel took that copy
    # with pidfd_getfd and wrote the grader a forged notebook; :func:`_grade_worker.undumpable`
    # keeps it from the worker's own). Signals from inside the sandbox do not reach its pid 1
    # either: the kernel cannot kill the worker. When pid 1 exits, every process left is killed.
    args = [*join, bwrap(), "--die-with-parent", "--new-session", "--as-pid-1",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not root:
        args += ["--unshare-user"]
    args += ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/") / link
        if target.is_symlink():
            args += ["--symlink", os.readlink(target), f"/{link}"]
        elif target.is_dir():
            args += ["--ro-bind", str(target), f"/{link}"]
    for name_ in ETC:
        if (Path("/etc") / name_).exists():
            args += ["--ro-bind", f"/etc/{name_}", f"/etc/{name_}"]
    # the tmpfs first, the venv after: a venv under /tmp or /work (the scratch folder) is mounted
    # on top of them, not hidden by them
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", size, "--perms", "1777", "--tmpfs", "/tmp",
             "--size", str(64 * 2**20), "--perms", "1777", "--tmpfs", "/dev/shm",
             "--size", size, "--perms", "0777", "--tmpfs", "/work"]
    for folder in dict.fromkeys((kit.base_prefix, kit.prefix)):  # base first: the venv may be inside
        if not str(folder).startswith("/usr/"):
            args += [*_dirs(folder), "--ro-bind", str(folder), str(folder)]
    args += ["--dir", "/grader", "--ro-bind", str(WORKER), "/grader/worker.py", "--chdir", "/work",
             "--hostname", "sandbox", "--clearenv"]
    env = {**_plain_env(), "PATH": f"{kit.prefix}/bin:/usr/bin:/bin", "MPLBACKEND": "Agg",
           "OPENBLAS_NUM_THREADS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1", **GRADING_ENV}
    for key, value in env.items():
        args += ["--setenv", key, value]
    args.append("--")
    if root:
        uid = str(sandbox_uid(slot))
        args += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    args += ["/usr/bin/prlimit", f"--as={MEMORY_BYTES}", f"--nproc={PROCESSES}", f"--cpu={cpu_seconds}",
             f"--fsize={FILE_BYTES}", f"--nofile={OPEN_FILES}", "--core=0", "--"]
    return args + (program or [str(kit.python), "/grader/worker.py", repr(float(budget)), name])


@dataclass
class Outcome:
    returncode: int | None  # None: killed at the time limit
    stdout: bytes | None  # None: more than OUTPUT_BYTES
    stderr: str  # its last lines


def _drain(stream, keep: int, tail: bool, into: list) -> None:
    """Read ``stream`` to its end, keeping at most ``keep`` bytes (the first, or the last)."""
    chunks, size, over = [], 0, False
    while block := stream.read(1 << 16):
        if tail:
            chunks.append(block)
            size += len(block)
            while size - len(chunks[0]) > keep:
                size -= len(chunks.pop(0))
        elif not over:
            if size + len(block) > keep:
                over, chunks = True, []
            else:
                chunks.append(block)
                size += len(block)
    into.append(None if over else b"".join(chunks))


def outer_env() -> dict[str, str]:
    """The environment bwrap itself starts with: never the grader's. (The sandbox's processes
    get :func:`command`'s ``--clearenv`` and ``--setenv``; but bwrap's own environment is
    readable in ``/proc`` from inside where it runs as the sandbox's user: graded as a normal
    user, a notebook read the teacher's token from it.)"""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def run(cmd: list[str], stdin: bytes, wall_seconds: float) -> Outcome:
    """Run ``cmd`` (a sandbox), feed it ``stdin``, kill it after ``wall_seconds``."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=outer_env())
    out: list = []
    err: list = []
    def feed() -> None:
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except OSError:  # the sandbox exited first
            pass

    readers = [threading.Thread(target=_drain, args=(proc.stdout, OUTPUT_BYTES, False, out), daemon=True),
               threading.Thread(target=_drain, args=(proc.stderr, 4096, True, err), daemon=True),
               threading.Thread(target=feed, daemon=True)]  # a thread: the time limit holds while it waits
    for reader in readers:
        reader.start()
    try:
        returncode: int | None = proc.wait(timeout=wall_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()  # bwrap: --die-with-parent takes its namespace, and every process in it
        proc.wait()
        returncode = None
    for reader in readers:
        reader.join(timeout=30)
    stdout = out[0] if out else None
    stderr = (err[0] if err else b"").decode("utf-8", errors="replace")
    return Outcome(returncode, stdout, stderr)


def check_works(kit: KitEnv) -> None:
    """Make one sandbox and run the kit's Python in it: a machine where bwrap cannot make its
    namespaces fails here, with bwrap's reason, before any notebook."""
    with cgroups(0) as groups:
        cmd = command(kit, 0, 1, "probe.ipynb", 60, [str(kit.python), "-c", "print('ok')"], groups)
        outcome = run(cmd, b"", 120)
    if outcome.returncode != 0 or outcome.stdout != b"ok\n":
        reason = outcome.stderr.strip().splitlines()[-1:] or [f"退出码 {outcome.returncode}"]
        raise SandboxError(f"无法建立评分的沙箱（bubblewrap）：{reason[0]}")


if __name__ == "__main__":  # a quick look: python -m tmath.sandbox VENV
    check_works(KitEnv.probe(Path(sys.argv[1])))
    print("ok")
