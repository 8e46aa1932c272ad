"""The packages are layers: every import (at module level or inside a function) goes to the same
folder or one below it, so no two folders import each other, and the reader never needs Beam."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Lowest first. A folder may import its own layer's other folders only where none imports
# back (checked below: no folder-level cycle at all).
LAYERS = [
    ["tfdata_reader"],
    ["core"],
    ["codec"],
    ["schema", "stats"],
    ["formats"],
    ["config"],
    ["plan"],
    ["sink"],
    ["publish"],
    ["transforms", "inspection"],
    ["job"],
    ["beam_jobs"],  # the package's own modules: cli, api, __init__, version
]
_RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}


def _folder(module: str) -> str | None:
    """The layer folder of a dotted module name (None: not ours)."""
    parts = module.split(".")
    if parts[0] == "tfdata_reader":
        return "tfdata_reader"
    if parts[0] != "beam_jobs":
        return None
    if len(parts) > 1 and (ROOT / "beam_jobs" / parts[1]).is_dir():
        return parts[1]
    return "beam_jobs"


def _module_of(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, function-level ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            # `from beam_jobs import x` names a module (or a lazily exported name) of beam_jobs.
            found += [
                (node.lineno, n if node.module == "beam_jobs" else node.module) for n in names
            ]
    return found


def _edges() -> list[tuple[str, str, str]]:
    """(importing folder, imported folder, where) for imports that cross folders."""
    edges = []
    for package in ("beam_jobs", "tfdata_reader"):
        for path in sorted((ROOT / package).rglob("*.py")):
            source = _folder(_module_of(path))
            for line, module in _imports(path):
                target = _folder(module)
                if target is not None and target != source:
                    where = f"{path.relative_to(ROOT)}:{line} imports {module}"
                    edges.append((source, target, where))
    return edges


def test_every_folder_has_a_layer():
    folders = {p.name for p in (ROOT / "beam_jobs").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(_RANK) - {"tfdata_reader", "beam_jobs"}


def test_imports_go_down_the_layers_only():
    upward = [where for source, target, where in _edges() if _RANK[target] > _RANK[source]]
    assert upward == []


def test_no_two_folders_import_each_other():
    graph: dict[str, set[str]] = {}
    for source, target, _ in _edges():
        graph.setdefault(source, set()).add(target)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(f for f in graph if reaches(f, f, {f}))
    assert cycles == []


@pytest.mark.parametrize("module", ["apache_beam", "beam_jobs"])
def test_the_reader_imports_neither_beam_nor_the_converter(module):
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "tfdata_reader").rglob("*.py"))
        for line, name in _imports(path)
        if name.split(".")[0] == module
    ]
    assert found == []


def test_the_layer_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The walk finds imports inside functions too (a check that cannot fail proves nothing)."""
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from beam_jobs.job.launcher import run\n")
    assert _imports(path) == [(2, "beam_jobs.job.launcher")]
    assert _folder("beam_jobs.job.launcher") == "job"
    assert _RANK["job"] > _RANK["core"]


def _format_folders() -> set[str]:
    """The formats of their own folder or module (csv, jsonl, parquet, ...), not `lines`."""
    formats = ROOT / "beam_jobs" / "formats"
    folders = {p.name for p in formats.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in formats.glob("*.py")}
    shared = {"lines", "base", "registry", "compressed", "zip_members", "__init__"}
    return (folders | modules) - shared


@pytest.mark.parametrize("shared", ["base.py", "lines"])
def test_the_shared_parts_of_formats_stand_on_no_single_format(shared):
    """`formats/base.py` (the interface) and `formats/lines/` (what line formats share) import
    no format's own modules: each format stands on them, not the other way round."""
    where = ROOT / "beam_jobs" / "formats" / shared
    paths = [where] if where.is_file() else sorted(where.rglob("*.py"))
    formats = _format_folders()
    assert {"csv", "jsonl", "parquet", "text", "images", "tfrecord"} <= formats
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in paths
        for line, name in _imports(path)
        if name.startswith("beam_jobs.formats.") and name.split(".")[2] in formats
    ]
    assert found == []


MAX_MODULE_LINES = 600


def test_no_module_is_past_600_lines():
    """A module past 600 lines is usually two ideas: cut it at its seam."""
    long = {
        str(path.relative_to(ROOT)): n
        for package in ("beam_jobs", "tfdata_reader")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
