"""Write the hidden setup cell (the first code cell) of every notebook, from `_config.yml`.

A reader who opens a chapter on Colab gets the notebook alone, without the repository:
`import tmath` would fail. So every notebook starts with a setup cell (tagged `remove-cell`,
hence absent from the site and the PDF) that does nothing when the kernel already has what
the chapter imports, and otherwise installs it:

- tmath, from the book's public repository (`repository.url` and `.branch` in `_config.yml`),
  with myst-nb for `glue`. While the URL is empty there is nowhere to install from, and the cell
  stops with an error that says how to get tmath instead.
- for the notebooks that import torch: the CPU build of torch and transformers, at the
  versions pinned in requirements-crosscheck.txt (Binder's image does not have them).

    python scripts/setup_cells.py           rewrite stale setup cells, print the notebooks it changed
    python scripts/setup_cells.py --check   exit 1 if a notebook's setup cell is stale

`make setup-cells` runs the first and re-executes what it printed; the tests run the second.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
TAG = "remove-cell"
HEADER = "# Setup (hidden on the website)"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
# A notebook needs torch when it imports torch, transformers, tmath.crosscheck or tmath.dist
# (whose process group imports torch in a child process).
NEEDS_TORCH = re.compile(r"^\s*(import|from)\s+(torch|transformers|tmath\.(crosscheck|dist))\b"
                         r"|^\s*from\s+tmath\s+import\s+.*\b(crosscheck|dist)\b", re.M)


def repository(config_path: Path = ROOT / "_config.yml") -> tuple[str, str]:
    """The book's repository URL ("" when unset) and branch, from `_config.yml`."""
    config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    repo = config.get("repository") or {}
    return (repo.get("url") or "").strip().rstrip("/"), (repo.get("branch") or "main").strip()


def pinned(name: str, requirements: Path = ROOT / "requirements-crosscheck.txt") -> str:
    """`name==version` as pinned in a requirements file."""
    for line in requirements.read_text(encoding="utf-8").splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.strip()
    raise SystemExit(f"{requirements.name}: no pin for {name!r}; add `{name}==VERSION` to it")


def needs_torch(nb) -> bool:
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code" and not is_setup_cell(c))
    return bool(NEEDS_TORCH.search(source))


def setup_source(url: str, branch: str, torch: bool) -> str:
    """The setup cell's source for a repository URL ("" if none) and branch."""
    lines = [
        f"{HEADER}: make sure this kernel has what the chapter imports.",
        "import importlib.util",
        "",
        'if importlib.util.find_spec("tmath") is None:',
    ]
    if url:
        lines.append(f'    %pip install --quiet "tmath @ git+{url}@{branch}#subdirectory=lib" '
                     f'{pinned("myst-nb", ROOT / "requirements.txt")}')
    else:
        lines += ['    raise ModuleNotFoundError(',
                  '        "this kernel lacks the book\'s library tmath: run `make lab` "',
                  '        "in the book\'s repository, or `pip install -e lib` there"',
                  '    )']
    if torch:
        lines += [
            'if importlib.util.find_spec("torch") is None:',
            f'    %pip install --quiet {pinned("torch")} --index-url {TORCH_INDEX}',
            'if importlib.util.find_spec("transformers") is None:',
            f'    %pip install --quiet {pinned("transformers")}',
        ]
    return "\n".join(lines)


def is_setup_cell(cell) -> bool:
    return cell.cell_type == "code" and cell.source.startswith(HEADER)


def expected_cell(nb, url: str, branch: str):
    cell = nbformat.v4.new_code_cell(setup_source(url, branch, needs_torch(nb)))
    cell.metadata["tags"] = [TAG]
    return cell


def first_code_cell(nb) -> int:
    return next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))


def stale(path: Path, url: str, branch: str) -> str | None:
    """Why the notebook's setup cell is out of date, or None."""
    nb = nbformat.read(path, as_version=4)
    i = first_code_cell(nb)
    first = nb.cells[i] if i < len(nb.cells) else None
    want = expected_cell(nb, url, branch)
    if first is None or not is_setup_cell(first):
        return "the first code cell is not the setup cell"
    if first.source != want.source:
        return "setup cell differs from _config.yml / the pins"
    if TAG not in first.metadata.get("tags", []):
        return f"setup cell is not tagged {TAG}"
    return None


def write(path: Path, url: str, branch: str) -> bool:
    nb = nbformat.read(path, as_version=4)
    want = expected_cell(nb, url, branch)
    i = first_code_cell(nb)
    if i < len(nb.cells) and is_setup_cell(nb.cells[i]):
        first = nb.cells[i]
        if first.source == want.source and TAG in first.metadata.get("tags", []):
            return False
        first.source = want.source
        first.metadata["tags"] = sorted(set(first.metadata.get("tags", [])) | {TAG})
        first.outputs, first.execution_count = [], None
    else:
        nb.cells.insert(i, want)
    nbformat.validator.normalize(nb)
    nbformat.write(nb, path)
    return True


def notebooks() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def main(argv: list[str]) -> int:
    url, branch = repository()
    if argv == ["--check"]:
        problems = [(p, why) for p in notebooks() if (why := stale(p, url, branch))]
        for p, why in problems:
            print(f"{p.relative_to(ROOT)}: {why}; run `make setup-cells`", file=sys.stderr)
        return 1 if problems else 0
    if argv:
        print("usage: setup_cells.py [--check]", file=sys.stderr)
        return 2
    for p in notebooks():
        if write(p, url, branch):
            print(p.relative_to(ROOT))  # one path a line: `make setup-cells` re-executes these
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
