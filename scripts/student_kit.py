"""Build the course kit a teacher hands out: `make student-kit`.

    python scripts/student_kit.py [OUT]        (default OUT: _build/student-kit)
    python scripts/student_kit.py [OUT] --roster roster.csv --secret-file F


writes ``OUT/transformer-math-kit/`` and ``OUT/transformer-math-kit.zip`` with

- ``notebooks/``: every notebook of the book as the student edition serves it
  (``book/_ext/student_edition.py``: no solution, an answer cell after each exercise),
  converted for plain JupyterLab (``scripts/lab_notebooks.py``: numbers in place of glue,
  links and author–year text in place of references and citations, hidden cells collapsed,
  their asserts removed), and the book's ``.md`` pages (preface, notation, bibliography) the
  notebooks link to, converted the same way;
- ``tmath-<version>-py3-none-any.whl``: the library without ``tmath/answer_keys/``; in
  their place ``tmath/_answer_hashes.py`` holds, per key, its tolerance and a salted
  hash of its grid cell (:func:`tmath.exercises.hash_table`, computed from the real
  keys at build time, with fresh salts each build);
- ``requirements.txt``: what the notebooks need to run and to be opened in JupyterLab:
  the closure of :data:`ROOTS` over the installed packages' own requirements, with the
  versions pinned in the book's ``requirements.txt``, and all of ``requirements-lab.txt``
  (JupyterLab and everything it requires, pinned there; the book's venv need not have it);
- ``README.md``: in Chinese, how to install, open, check an answer and hand in.

Nothing in the kit is a solution or a key: ``tests/test_student_kit.py`` scans it.

With a roster and a course secret (``make student-kit ROSTER=roster.csv COURSE_SECRET_FILE=F``)
it writes one kit per student, ``OUT/<student>/transformer-math-kit/`` and its zip, in which the
varied exercises (:mod:`tmath.variants`) carry the student's own numbers; their parts have no
hash in the wheel (the teacher grades them with the same roster and secret), and the README
says so (``tests/test_variants.py``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import nbformat
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(ROOT / "scripts"))

import lab_notebooks  # noqa: E402
from student_edition import strip_notebook  # noqa: E402

from book_pdf import toc_pages  # noqa: E402
from setup_cells import needs_torch, pinned  # noqa: E402

KIT_NAME = "transformer-math-kit"
#: What a student's environment needs besides tmath's own dependencies (lib/pyproject.toml):
#: the notebooks import matplotlib (figures; mplfonts is its Chinese font), IPython's display
#: and ipywidgets (the calculator appendix); ipykernel runs them. JupyterLab, which opens them,
#: comes with all it requires from requirements-lab.txt (:data:`LAB`).
#: Not needed: myst-nb, and with it Sphinx and SQLAlchemy (23 packages): the kit's notebooks
#: have their glue resolved into their text (scripts/lab_notebooks.py), and the glue calls of
#: their hidden cells write their records without it (tmath.nb.glue). Nor jupyter-book and
#: Sphinx's extensions, playwright, pytest, ruff. PyTorch and transformers: only the notebooks
#: listed in the README, which install them on first run.
ROOTS = ("ipykernel", "ipywidgets", "matplotlib", "mplfonts")
#: JupyterLab's whole closure, pinned: the book's venv does not install it (`make lab` does).
LAB = ROOT / "requirements-lab.txt"


def _pins(path: Path = ROOT / "requirements.txt") -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonicalize_name(name)] = version.strip()
    return pins


def requirements(roots: tuple[str, ...] = ROOTS) -> list[str]:
    """``name==version`` for ``roots``, tmath's dependencies and everything they require,
    and every package :data:`LAB` pins.

    The requirements of each package are read from the installed distributions
    (markers evaluated for this Python, extras followed); versions come from the
    book's pinned ``requirements.txt``, which must pin every one of them. A package both
    files pin must have one version (tests/test_requirements.py checks it too).
    """
    lib = tomllib.loads((ROOT / "lib" / "pyproject.toml").read_text(encoding="utf-8"))
    todo = [Requirement(r) for r in (*lib["project"]["dependencies"], *roots)]
    pins, missing = _pins(), []
    seen: dict[str, set[str]] = {}  # name -> extras followed ("" is the package itself)
    env = default_environment()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        have = seen.get(name, set())
        new = ({""} | set(req.extras)) - have
        if not new:
            continue
        seen[name] = have | new
        if name not in pins:
            missing.append(name)
            continue
        for text in metadata.requires(name) or []:
            dep = Requirement(text)
            if any(dep.marker is None if e == "" else False for e in new) or (
                dep.marker is not None and any(dep.marker.evaluate({**env, "extra": e}) for e in new)
            ):
                todo.append(dep)
    if missing:
        raise SystemExit(f"requirements.txt pins no version of {sorted(set(missing))}: add them")
    out = {n: pins[n] for n in seen}
    for name, version in _pins(LAB).items():
        if out.setdefault(name, version) != version:
            raise SystemExit(f"{LAB.name} pins {name}=={version}, requirements.txt {name}=={out[name]}: "
                             "give both the same version")
    return [f"{n}=={out[n]}" for n in sorted(out)]


def _stripped() -> list[tuple[str, Path, nbformat.NotebookNode]]:
    """(page, path, notebook stripped of its solutions) for every notebook page of the book."""
    out = []
    for page in toc_pages():
        path = ROOT / f"{page}.ipynb"
        if path.is_file():
            out.append((page, path, strip_notebook(nbformat.read(path, as_version=4))))
    return out


def student_notebooks(book: lab_notebooks.Book | None = None, params: dict | None = None,
                      stripped: list | None = None) -> list[tuple[Path, nbformat.NotebookNode]]:
    """(path under ``notebooks/``, notebook) for every notebook page of the book: stripped of
    its solutions, then converted for plain JupyterLab (``scripts/lab_notebooks.py``: glue
    resolved, references and citations as text and links, hidden cells collapsed, and the
    hidden cells' asserts, which may bound an answer, removed). ``params``: one student's
    draw of the varied exercises (:func:`tmath.variants.draws`), glued into their statements."""
    import copy

    from tmath.variants import personalize

    book = book or lab_notebooks.Book.load()
    out = []
    for page, path, nb in stripped if stripped is not None else _stripped():
        if params:
            nb = copy.deepcopy(nb)
            personalize(nb, params)
        out.append((path.relative_to(ROOT / "book"), lab_notebooks.convert(nb, page, book, student=True)))
    return out


def student_pages(book: lab_notebooks.Book) -> list[tuple[Path, str]]:
    """(path under ``notebooks/``, plain Markdown) for the book's ``.md`` pages (the preface,
    the notation, the bibliography), which the notebooks link to."""
    return [(Path(f"{page}.md").relative_to("book"), lab_notebooks.convert_md_page(page, book, student=True))
            for page in toc_pages() if (ROOT / f"{page}.md").is_file()]


def _copy_data(kit: Path) -> None:
    """The files the notebooks read or show beside them (a benchmark's JSON and figure)."""
    for source in lab_notebooks.data_files():
        path = kit / "notebooks" / source.relative_to(ROOT / "book")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, path)


def build_wheel(out: Path, varied: bool = False) -> Path:
    """The tmath wheel without answer keys, with their hashes; returns its path. ``varied``: a
    student's own kit, whose varied parts (:mod:`tmath.variants`) have no hash either."""
    from tmath.exercises import graded_exercises, hash_table, labels
    from tmath.variants import varied_labels

    graded = graded_exercises()  # BOOK_GRADED: no hash, so no self-check, for these
    own = set(varied_labels()) if varied else set()
    parts = [label for label in labels() if label.split("/")[0] in graded or label in own]
    table = hash_table([label for label in labels() if label not in parts])
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "lib"
        shutil.copytree(
            ROOT / "lib", lib,
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "answer_keys"),
        )
        (lib / "tmath" / "_answer_hashes.py").write_text(
            '"""The course kit\'s answer keys: per exercise its tolerance and a salted PBKDF2 of\n'
            "the key's grid cell, never the key (written by scripts/student_kit.py; the rule is in\n"
            'tmath.exercises). GRADED: the parts a teacher grades, with no hash at all."""\n\nKEYS = {\n'
            + "".join(f"    {label!r}: {entry!r},\n" for label, entry in table.items())
            + "}\n"
            + f"GRADED = {parts!r}\n",
            encoding="utf-8",
        )
        out.mkdir(parents=True, exist_ok=True)
        # The project's own PEP 517 backend, called as `pip wheel --no-deps --no-build-isolation`
        # calls it (the same wheel, byte for byte), without starting pip: seconds less.
        backend = tomllib.loads((lib / "pyproject.toml").read_text(encoding="utf-8"))["build-system"][
            "build-backend"]
        built = subprocess.run(
            [sys.executable, "-c", "import importlib, sys\n"
             "importlib.import_module(sys.argv[1]).build_wheel(sys.argv[2])", backend, str(out.resolve())],
            cwd=lib, capture_output=True, text=True,
        )
        if built.returncode != 0:
            raise SystemExit(f"构建 tmath 的 wheel 失败（{backend}；检查 lib/pyproject.toml）：\n"
                             f"{built.stdout[-3000:]}{built.stderr[-3000:]}")
    wheels = sorted(out.glob("tmath-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one tmath wheel in {out}, found {wheels}")
    return wheels[0]


README = """\
# 《Transformer 的数学》课程包

这个文件夹里有：

- `notebooks/`：全书各章的笔记本（学生版）。没有解答；每道练习后面有一个答案单元格。
- `{wheel}`：本书的计算库 tmath。它不含答案，只能告诉你答得对不对。
- `requirements.txt`：运行和打开这些笔记本所需的软件包，版本都已固定。

## 安装

需要 Python 3.11 或更新的版本，以及能访问软件包索引（PyPI 或其镜像）的网络。在这个文件夹里执行：

```bash
python3 -m venv .venv
source .venv/bin/activate          # Windows：.venv\\Scripts\\activate
pip install -r requirements.txt {wheel}
```

## 打开笔记本

```bash
jupyter lab notebooks/
```

正文里的数都已经写好（网页版由代码算出后嵌入正文，这里也一样），交叉引用是指向同一文件夹里其他笔记本的链接，
文献写成“作者, 年份”，点击可打开原文。折叠起来的单元格（点左侧的竖条或“…”展开）是网页上隐藏的代码：
以 `# 记账单元格（网站上隐藏）` 开头的单元格记下正文要用的数，以 `# 网站上只显示这个单元格的输出` 开头的
单元格画图或列表。它们不必细读，但要和其他单元格一起运行。

每个笔记本第一个单元格检查环境。下面 {n_torch} 个笔记本还要用 PyTorch 和 transformers：{torch_list}。
第一次运行时，它们的第一个单元格会自动安装 CPU 版 PyTorch（约 200 MB，需要能访问 download.pytorch.org）；
也可以事先手动安装：

```bash
pip install {torch_pin} --index-url https://download.pytorch.org/whl/cpu
pip install {transformers_pin}
```

## 作答与自查

每道有数值答案的练习后面有一个答案单元格，例如：

```python
from tmath.exercises import my_answer

my_answer("ex-tour-1", None)  # 整数，单位：个参数
```

把 `None` 换成你的答案（数、变量名或算式都可以），运行这个单元格，会看到“✓ 正确”或“✗ 还不对”，
以及这道题的容差。在任何单元格里也可以用 `tmath.check(你的数, "ex-tour-1")` 自查，
但只有答案单元格里的 `my_answer(...)` 会被评分。没有数值答案的练习（推导、解释），
把答案写在它的答案单元格里（可以改成 Markdown 单元格），由老师批阅。

容差的确切含义：

- 标着“精确整数”的题，答案是个数（参数个数、卡数、序列条数……），必须是整数，
  并且与正确答案完全相等（标着“整数，绝对误差 ≤ 1”的，允许差 1）；填 0.5 这样的非整数一定判为不对。
- 标着“绝对误差 ≤ a”或“相对误差 ≤ r”的题，与正确答案相差不超过容差的答案一定判为正确；
  检查器按格点比较，所以相差略超过容差（最多到容差的 1.25 倍）的答案也可能判为正确，再远就一定不对。
- 除非题目另有说明，按 4 位有效数字认真手算，结果就在容差之内。

## 自查的限度

这个 tmath 里没有答案：每道练习题只存了它的容差和一个加盐的哈希值
（PBKDF2，故意算得慢：一个 CPU 核上每算一次约 1.4 秒），
检查器只能比较“你的答案落在哪个格点”，不能把答案还原出来。所以自查要等一等：对的答案通常算一两次，约 1–2 秒；
错的答案要把附近 9 个格点都算一遍，有几个核就同时算几个（两核约 8 秒）。执意的人可以一个格点一个格点地试：
在一个核上，一道典型的题（中位数）不知道数量级时要一个多小时，知道数量级时约十分钟；小的整数（几张卡、几个头）一试就中。
自查只是让你不必、也不能顺手偷看答案。
老师要计分的题，课程包里连哈希都没有：答案单元格只记下你的答案，不做自查（会显示“这道题由老师评分”）。
成绩以老师评分为准：老师会在沙箱里从头运行你交上来的笔记本，用完整的答案核对。

## 交作业

1. 在 JupyterLab 里选“Kernel → Restart Kernel and Run All Cells”（重启内核并运行全部单元格），
   确认从头到尾没有报错；
2. 保存（Ctrl+S），把老师布置的 `.ipynb` 文件原样交上去：不要改文件名，不要删除或移动答案单元格。

老师会在干净的内核里、限时重新运行整个笔记本，从答案单元格读出你的答案。某个单元格报错不会让整份作业作废，
但依赖它的答案会读不到。
"""


def readme(wheel: str, notebooks: list[tuple[Path, nbformat.NotebookNode]]) -> str:
    torch = [str(Path("notebooks") / rel) for rel, nb in notebooks if needs_torch(nb)]
    return README.format(
        wheel=wheel, n_torch=len(torch), torch_list="、".join(f"`{t}`" for t in torch),
        torch_pin=pinned("torch"), transformers_pin=pinned("transformers"),
    )


def _zip(folder: Path, archive: Path) -> None:
    archive.unlink(missing_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                z.write(path, Path(folder.name) / path.relative_to(folder))


def build_student_kits(out: Path, roster) -> list[Path]:
    """One kit per student of ``roster`` (:class:`tmath.variants.Roster`) under
    ``out/<student>/``, each with the student's numbers; returns the kit folders."""
    from tmath.variants import kit_note

    book = lab_notebooks.Book.load()
    stripped = _stripped()
    pages = student_pages(book)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp), varied=True)
        reqs = ("# 《Transformer 的数学》课程包：运行笔记本所需的软件包（版本固定）\n"
                + "\n".join(requirements()) + "\n")
        kits = []
        for student in roster.students:
            kit = out / student / KIT_NAME
            shutil.rmtree(kit, ignore_errors=True)
            notebooks = student_notebooks(book, roster.draws(student), stripped)
            for rel, nb in notebooks:
                path = kit / "notebooks" / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, path)
            for rel, text in pages:
                path = kit / "notebooks" / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            _copy_data(kit)
            shutil.copy2(wheel, kit / wheel.name)
            (kit / "requirements.txt").write_text(reqs, encoding="utf-8")
            (kit / "README.md").write_text(readme(wheel.name, notebooks) + kit_note(student),
                                           encoding="utf-8")
            _zip(kit, out / student / f"{KIT_NAME}.zip")
            kits.append(kit)
    return kits


def build_kit(out: Path = ROOT / "_build" / "student-kit") -> Path:
    """Build the kit folder and its zip under ``out``; returns the folder."""
    kit = out / KIT_NAME
    shutil.rmtree(kit, ignore_errors=True)
    book = lab_notebooks.Book.load()
    notebooks = student_notebooks(book)
    for rel, nb in notebooks:
        path = kit / "notebooks" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    for rel, text in student_pages(book):
        path = kit / "notebooks" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    _copy_data(kit)
    wheel = build_wheel(kit)
    (kit / "requirements.txt").write_text(
        "# 《Transformer 的数学》课程包：运行笔记本所需的软件包（版本固定）\n"
        + "\n".join(requirements()) + "\n",
        encoding="utf-8",
    )
    (kit / "README.md").write_text(readme(wheel.name, notebooks), encoding="utf-8")
    _zip(kit, out / f"{KIT_NAME}.zip")
    return kit


def main(argv: list[str]) -> int:
    import argparse

    from tmath.variants import Roster, VariantError

    ap = argparse.ArgumentParser(prog="student_kit.py")
    ap.add_argument("out", nargs="?", default=str(ROOT / "_build" / "student-kit"))
    ap.add_argument("--roster", default="")
    ap.add_argument("--secret-file", default="")
    args = ap.parse_args(argv)
    out = Path(args.out)
    try:
        roster = Roster.load(Path(args.roster) if args.roster else None,
                             Path(args.secret_file) if args.secret_file else None)
    except VariantError as e:
        print(f"student-kit：错误：{e}", file=sys.stderr)
        return 2
    if roster is not None:
        kits = build_student_kits(out.resolve(), roster)
        print(f"课程包：{len(kits)} 个学生各一份，在 {out.resolve()}/<学生>/{KIT_NAME}（及同名 .zip）")
        return 0
    kit = build_kit(out.resolve())
    n = len(list((kit / "notebooks").rglob("*.ipynb")))
    print(f"课程包：{kit}（{n} 个笔记本）和 {kit.parent / (KIT_NAME + '.zip')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
