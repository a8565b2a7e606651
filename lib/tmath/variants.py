"""Every student their own numbers: exercises whose parameters a teacher's course draws per student.

The book shows each varied exercise with its **default** parameters (the book's values). A
teacher with a roster and a course secret builds one kit per student
(``make student-kit ROSTER=roster.csv COURSE_SECRET_FILE=F``), in which the varied exercises
carry numbers drawn for that student, and grades each student against their own keys
(``tmath grade ... --roster R --secret-file F``); ``tmath grade-keys --roster R --secret-file F
--out keys.csv`` lists every student's keys.

**One source of truth.**  Each varied exercise has a parameter set here (:data:`PARAMETERS`:
per parameter its default and the values a student may draw).  Its statement shows the
parameters through glue (``{glue:text}`var-ex-units-1-tokens```, glued by
:func:`glue_parameters` in a hidden cell of the chapter), and its keys are functions of the
parameters (:func:`varied` in ``tmath.answer_keys``; the book's key is the function at the
defaults).  A student's kit replaces the glued text with the student's values
(:func:`personalize`), and the grader computes the student's keys from the same values
(:func:`student_keys`).

**The draw** is deterministic: HMAC-SHA256 of ``exercise|student`` under the course secret
picks one combination of the parameters' values other than the book's (:func:`draw`), so the
same roster and secret always give the same kits and keys, and a student who does not know the
secret cannot compute a classmate's numbers.  Two students draw the same combination of one
exercise with probability 1 / (its number of combinations, 5 to 35 here): their keys of that
exercise coincide, and a copied answer is then right.  Besides, a part may depend on only some
parameters (``ex-mem-1/0``, ZeRO-0's model states, depends on the model, not on the GPU count;
``ex-data-1/gb`` barely on the node count).  ``tmath grade-keys`` names, for every student and
part, the classmates whose key the student's key accepts (column 同答案的同学), so a teacher sees
exactly which parts of which pairs may coincide.

**Practice checks** in a student's kit: the kit holds no hash of a varied part (a slow hash per
student and part would cost 1.4 s each, some 45 minutes of CPU for 60 students and 32 parts),
so the answer cell of a varied part records the answer and says that the teacher grades it
(此题的答案由老师评分), as it does for a part the teacher marked as graded (``BOOK_GRADED``).  The
parts that are not varied keep their self-check.
"""

from __future__ import annotations

import csv
import hmac
import io
import itertools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

#: Glue names of parameter texts: ``var-<exercise>-<parameter>``.
GLUE_PREFIX = "var-"

#: How a model preset is named in a statement.
MODEL_NAMES = {
    "gpt3-125m": "GPT-3 Small（gpt3-125m）", "gpt3-350m": "GPT-3 Medium（gpt3-350m）",
    "gpt3-760m": "GPT-3 Large（gpt3-760m）", "gpt3-1.3b": "GPT-3 XL（gpt3-1.3b）",
    "gpt3-2.7b": "GPT-3 2.7B（gpt3-2.7b）", "gpt3-6.7b": "GPT-3 6.7B（gpt3-6.7b）",
    "gpt3-13b": "GPT-3 13B（gpt3-13b）", "gpt3-175b": "GPT-3 175B（gpt3-175b）",
    "llama3-8b": "Llama 3 8B（llama3-8b）", "llama3-70b": "Llama 3 70B（llama3-70b）",
    "llama3.1-405b": "Llama 3.1 405B（llama3.1-405b）", "mistral-7b": "Mistral 7B（mistral-7b）",
    "qwen2-7b": "Qwen2 7B（qwen2-7b）", "gemma-2-9b": "Gemma 2 9B（gemma-2-9b）",
    "gemma-2-27b": "Gemma 2 27B（gemma-2-27b）", "mixtral-8x7b": "Mixtral 8x7B（mixtral-8x7b）",
    "qwen3-30b-a3b": "Qwen3 30B-A3B（qwen3-30b-a3b）",
}


def _gpu_text(name: str) -> str:
    """``"80 GiB 的 H100"``: a GPU with its HBM, as the statements name one."""
    from tmath import get_hardware

    return f"{get_hardware(name).hbm_bytes / 2**30:g} GiB 的 {name.replace('-40GB', '')}"


@dataclass(frozen=True)
class Param:
    """One parameter of a varied exercise: the book's value and the values a student may draw."""

    default: Any
    choices: tuple
    #: "model" (a preset, named by :data:`MODEL_NAMES`), "gpu" (a GPU with its HBM), "int"
    #: (with thousands separators: 1,024), "name" (as it is)
    kind: str = "int"

    def text(self, value) -> str:
        if self.kind == "model":
            return MODEL_NAMES[value]
        if self.kind == "gpu":
            return _gpu_text(value)
        if self.kind == "int":
            return f"{value:,}"
        return str(value)


#: Per varied exercise: its parameters (name -> :class:`Param`). The statement glues each as
#: ``var-<exercise>-<name>``; the keys registered with :func:`varied` are functions of them.
PARAMETERS: dict[str, dict[str, Param]] = {
    "ex-tour-1": {"model": Param("gpt3-125m", ("gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b",
                                               "gpt3-6.7b", "gpt3-13b", "gpt3-175b"), "model")},
    # not GPT-3 175B: its V·d = 617,558,016 is printed in the architecture and 6PT chapters
    "ex-tour-3": {"model": Param("gpt3-13b", ("gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b",
                                              "gpt3-6.7b"), "model")},
    "ex-arch-1": {"model": Param("gpt3-1.3b", ("gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-2.7b",
                                               "gpt3-6.7b", "gpt3-13b", "gpt3-175b"), "model")},
    # not GPT-3 175B (its fp16 gradient, the same bytes, is printed in the data-parallel chapter)
    # nor Llama 3 70B (its 141.1 GB of weights in its own chapter)
    "ex-arch-3": {"model": Param("llama3.1-405b", ("gpt3-13b", "gpt3-6.7b", "mixtral-8x7b",
                                                   "gemma-2-27b", "gemma-2-9b"), "model"),
                  "gpu": Param("H100", ("A100-40GB", "H200", "B200"), "gpu")},
    # none of the cheatsheet's models: its table prints each one's training state in TB
    "ex-arch-4": {"model": Param("qwen3-30b-a3b", ("gemma-2-9b", "gpt3-13b", "gpt3-6.7b", "gpt3-2.7b",
                                                   "gpt3-1.3b"), "model"),
                  "gpu": Param("H100", ("A100-40GB", "H200", "B200"), "gpu")},
    # not GPT-3 175B: its V·d = 617,558,016 is printed in the architecture and 6PT chapters
    "ex-fwd-4": {"model": Param("gpt3-6.7b", ("gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b",
                                              "gpt3-13b"), "model")},
    "ex-fwd-1": {"tokens": Param(2048, (128, 256, 384, 512, 640, 768, 896, 1024, 1280, 1536, 1792))},
    "ex-units-1": {"model": Param("llama3-70b", ("llama3-8b", "llama3.1-405b", "mistral-7b"), "model"),
                   "tokens": Param(2048, (256, 512, 1024, 4096, 8192))},
    "ex-units-2": {"gpu": Param("H100", ("V100", "A100", "H200", "B200", "TPUv4", "TPUv5e", "TPUv5p",
                                         "TPUv6e"), "name")},
    "ex-sixpt-1": {"model": Param("gpt3-175b", ("gpt3-6.7b", "gpt3-13b"), "model"),
                   "tokens": Param(1024, (256, 512, 768, 1536))},
    # not the source's 6,400 cards: their 29.0 days are printed in the errata appendix
    "ex-sixpt-4": {"gpus": Param(8192, (1024, 1536, 2048, 2560, 3072, 4096, 5120, 10240, 12288,
                                        16384, 20480, 24576, 32768))},
    "ex-mem-1": {"model": Param("llama3-70b", ("llama3-8b", "llama3.1-405b", "gpt3-175b",
                                               "mixtral-8x7b"), "model"),
                 "gpus": Param(64, (16, 32, 128, 256, 512))},
    "ex-data-1": {"model": Param("llama3-70b", ("llama3-8b", "mistral-7b", "gemma-2-27b",
                                                "mixtral-8x7b"), "model"),
                  "nodes": Param(8, (2, 4, 16, 32))},
    "ex-data-2": {"microbatches": Param(16, (2, 3, 4, 5, 6, 10, 12, 20, 24, 32, 40, 48, 64, 96, 128))},
    "ex-data-4": {"gpus": Param(1024, (16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 2048, 4096))},
}

#: How keys.csv names a parameter (in Chinese, for the teacher).
PARAM_NAMES = {"model": "模型", "gpu": "GPU", "tokens": "token 数", "gpus": "卡数", "nodes": "机器数",
               "microbatches": "微批次数"}

#: Texts a statement shows that follow from the parameters (``var-<exercise>-<name>``).
DERIVED: dict[str, dict[str, Callable[[SimpleNamespace], str]]] = {
    "ex-data-1": {"gpus": lambda p: f"{8 * p.nodes:,}"},
    "ex-data-2": {"first": lambda p: f"{p.microbatches - 1:,}"},
}

#: part label -> (exercise, key function of the parameters); filled by :func:`varied`.
_FUNCTIONS: dict[str, tuple[str, Callable[[SimpleNamespace], float]]] = {}


class VariantError(ValueError):
    """A roster or secret that cannot be used; the message (Chinese) names the fix."""


def defaults(exercise: str) -> dict[str, Any]:
    return {name: p.default for name, p in PARAMETERS[exercise].items()}


def combinations(exercise: str) -> list[dict[str, Any]]:
    """Every combination of the exercise's parameter values a student may draw: each parameter
    its default or one of its choices, the book's own combination excluded."""
    params = PARAMETERS[exercise]
    names = list(params)
    values = [(params[n].default, *params[n].choices) for n in names]
    combos = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]
    return [c for c in combos if c != defaults(exercise)]


def varied(label: str, **tolerance):
    """Register ``fn(p)`` (``p.<parameter>``) as the key of part ``label`` of a varied exercise:
    the book's key (:func:`tmath.exercises.answer` with ``tolerance``) is ``fn`` at the
    defaults, a student's key ``fn`` at the student's draw."""
    from tmath.exercises import answer

    exercise = label.split("/")[0]
    if exercise not in PARAMETERS:
        raise ValueError(f"{label}：{exercise} 没有参数集（tmath.variants.PARAMETERS）")

    def register(fn: Callable[[SimpleNamespace], float]) -> Callable[[SimpleNamespace], float]:
        _FUNCTIONS[label] = (exercise, fn)
        answer(label, **tolerance)(lambda: fn(SimpleNamespace(**defaults(exercise))))
        return fn

    return register


def varied_labels() -> list[str]:
    """The labels of every varied part (loading the keys: full edition only)."""
    from tmath import exercises

    exercises._load()
    return list(_FUNCTIONS)


def texts(exercise: str, params: dict[str, Any]) -> dict[str, str]:
    """glue name -> the text a statement shows for ``params``."""
    out = {f"{GLUE_PREFIX}{exercise}-{name}": p.text(params[name])
           for name, p in PARAMETERS[exercise].items()}
    for name, fn in DERIVED.get(exercise, {}).items():
        out[f"{GLUE_PREFIX}{exercise}-{name}"] = fn(SimpleNamespace(**params))
    return out


def glue_parameters(exercise: str) -> None:
    """Glue the book's parameter texts of ``exercise`` (a hidden cell of its chapter)."""
    from tmath.nb import glue

    for name, text in texts(exercise, defaults(exercise)).items():
        glue(name, text, display=False)


# --- the draw --------------------------------------------------------------------------------


def draw(secret: bytes, student: str, exercise: str) -> dict[str, Any]:
    """The parameters of ``exercise`` for ``student``: HMAC-SHA256(secret, "exercise|student")
    read as an integer, modulo the number of :func:`combinations`."""
    combos = combinations(exercise)
    digest = hmac.new(secret, f"{exercise}|{student}".encode(), "sha256").digest()
    return combos[int.from_bytes(digest, "big") % len(combos)]


def draws(secret: bytes, student: str) -> dict[str, dict[str, Any]]:
    return {exercise: draw(secret, student, exercise) for exercise in PARAMETERS}


def key_value(label: str, params: dict[str, Any]) -> float:
    """The key of part ``label`` for ``params`` (full edition)."""
    varied_labels()
    _, fn = _FUNCTIONS[label]
    return float(fn(SimpleNamespace(**params)))


@contextmanager
def student_keys(params: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Inside: :func:`tmath.exercises.check` checks every varied part against the key of
    ``params`` (exercise -> parameters, as :func:`draws` gives them); the book's keys after."""
    from tmath import exercises

    varied_labels()
    saved = {}
    for label, (exercise, fn) in _FUNCTIONS.items():
        if exercise in params:
            p = SimpleNamespace(**params[exercise])
            saved[label] = exercises._KEYS[label]
            exercises._KEYS[label] = replace(saved[label], compute=lambda fn=fn, p=p: fn(p))
    try:
        yield
    finally:
        exercises._KEYS.update(saved)


# --- roster and secret -------------------------------------------------------------------------

_HEADER = {"学生", "学号", "姓名", "student", "student_id", "id", "name"}
_UNSAFE = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]')


def read_secret(path: Path) -> bytes:
    """The course secret: the file's bytes, surrounding whitespace removed; at least 16."""
    try:
        data = Path(path).read_bytes().strip()
    except OSError as e:
        raise VariantError(f"--secret-file / COURSE_SECRET_FILE：无法读取 {path}"
                           f"（{type(e).__name__}）") from None
    if len(data) < 16:
        raise VariantError(f"--secret-file / COURSE_SECRET_FILE：{path} 只有 {len(data)} 个字节；"
                           "课程密钥至少要 16 个字节，例如用 `python3 -c \"import secrets; "
                           "print(secrets.token_hex(32))\" > course-secret.txt` 生成，并且不要交给学生")
    return data


def read_roster(path: Path) -> list[str]:
    """The student IDs of a roster: the first column of a CSV file (UTF-8, a header row allowed:
    学生, 学号, student, id ...), kept as text (``00123`` stays ``00123``); blank rows skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise VariantError(f"--roster / ROSTER：无法读取 {path}"
                           f"（{type(e).__name__}；名单应是 UTF-8 的 CSV 文件）") from None
    students: list[str] = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        sid = row[0].strip() if row else ""
        if not sid or (number == 1 and sid.lower() in _HEADER):
            continue
        if _UNSAFE.search(sid) or sid.startswith(".") or len(sid) > 100:
            raise VariantError(f"--roster：{path} 第 {number} 行的学生 {sid[:40]!r} 不能用作文件夹名"
                               "（不能含 / \\ : * ? \" < > | 或控制字符，不能以 . 开头，"
                               "最长 100 个字符）：请改名")
        if sid in students:
            raise VariantError(f"--roster：{path} 第 {number} 行的学生 {sid!r} 重复出现：每个学生只能有一行")
        students.append(sid)
    if not students:
        raise VariantError(f"--roster：{path} 里没有学生（第一列写学生的编号，每行一个）")
    return students


@dataclass(frozen=True)
class Roster:
    """A class: its students and the course secret their numbers are drawn with."""

    students: tuple[str, ...]
    secret: bytes = b""

    @classmethod
    def load(cls, roster: Path | None, secret_file: Path | None) -> Roster | None:
        """None without a roster; a clear error when only one of the two is given."""
        if roster is None and secret_file is None:
            return None
        if roster is None or secret_file is None:
            given, missing = ("--roster", "--secret-file") if roster else ("--secret-file", "--roster")
            raise VariantError(f"给了 {given} 却没有 {missing}："
                               "每个学生的数由名单和课程密钥一起决定，两个都要给")
        return cls(tuple(read_roster(roster)), read_secret(secret_file))

    def draws(self, student: str) -> dict[str, dict[str, Any]]:
        return draws(self.secret, student)

    def keys(self, student: str):
        """Context manager: the student's keys (the book's for a student not on the roster)."""
        return student_keys(self.draws(student) if student in self.students else {})


# --- the student's kit ---------------------------------------------------------------------------


def personalize(nb, params: dict[str, dict[str, Any]]) -> int:
    """Replace, in notebook ``nb`` (its saved glue records), the texts of the varied exercises'
    parameters by those of ``params``; returns how many records changed."""
    wanted: dict[str, str] = {}
    for exercise, p in params.items():
        wanted.update(texts(exercise, p))
    changed = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("scrapbook")
            if not meta or meta.get("name") not in wanted:
                continue
            prefix = meta.get("mime_prefix", "")
            output["data"] = {f"{prefix}text/plain": repr(wanted[meta["name"]])}
            changed += 1
    return changed


KIT_NOTE = """
## 你自己的题目

这份课程包是为你（{student}）生成的：有 {n} 道练习（共 {parts} 个小题）里的数（模型、token 数、卡数……）
是按你的学号抽取的，和书上、和同学的都可能不同。请按你的笔记本里写的数作答：
网页版书上的解答是书上那组数的答案，不是你的。这些小题在课程包里不能自查
（答案单元格会显示“这道题由老师评分”），由老师用你的那组数评分：{labels}。
"""


def kit_note(student: str) -> str:
    parts = varied_labels()
    return KIT_NOTE.format(student=student, n=len(PARAMETERS), parts=len(parts),
                           labels="、".join(f"`{x}`" for x in parts))


# --- tmath grade-keys -----------------------------------------------------------------------------

KEYS_HEADER = ["学生", "练习", "参数", "答案", "容差", "同答案的同学"]


def _safe(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def keys_table(roster: Roster) -> str:
    """keys.csv: one row per student and varied part (its parameters, its key, its tolerance, and
    the classmates whose key the student's key accepts)."""
    from tmath import exercises
    from tmath.exercises import plain_number

    labels = varied_labels()
    values = {s: {label: key_value(label, roster.draws(s)[label.split("/")[0]]) for label in labels}
              for s in roster.students}
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(KEYS_HEADER)
    for s in roster.students:
        params = roster.draws(s)
        for label in labels:
            exercise = label.split("/")[0]
            key = replace(exercises._KEYS[label], compute=lambda v=values[s][label]: v)
            same = [o for o in roster.students if o != s and key.accepts(values[o][label])]
            shown = "；".join(f"{PARAM_NAMES.get(n, n)}={v}" for n, v in params[exercise].items())
            writer.writerow([_safe(s), label, shown, plain_number(values[s][label]),
                             key.tolerance_text(), _safe("、".join(same))])
    return table.getvalue()


def add_keys_parser(subparsers):
    p = subparsers.add_parser(
        "grade-keys", help="列出名单上每个学生的变体题答案（老师用）",
        description="按名单和课程密钥，列出每个学生每个变体小题的参数、答案、容差，以及与他答案相同的同学。",
    )
    p.add_argument("--roster", required=True, metavar="roster.csv", help="名单：第一列是学生的编号")
    p.add_argument("--secret-file", required=True, metavar="F", help="课程密钥文件（与生成课程包时相同）")
    p.add_argument("--out", required=True, metavar="keys.csv", help="写出的答案表")
    p.set_defaults(func=run_keys)
    return p


def run_keys(args) -> int:
    import sys

    from tmath.exercises import has_keys

    if not has_keys():
        print("tmath grade-keys：错误：这个 tmath 是课程包版，没有答案：请在本书仓库的完整版环境里运行",
              file=sys.stderr)
        return 2
    try:
        roster = Roster.load(Path(args.roster), Path(args.secret_file))
    except VariantError as e:
        print(f"tmath grade-keys：错误：{e}", file=sys.stderr)
        return 2
    text = keys_table(roster)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8-sig")
    print(f"已写出 {len(roster.students)} 个学生 × {len(varied_labels())} 个变体小题的答案：{out}")
    return 0
