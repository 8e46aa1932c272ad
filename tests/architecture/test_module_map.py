"""docs/architecture.md holds the one module map: every module of both packages is in it, and
every module it names exists."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _mapped() -> list[str]:
    """The module paths in the map's table (its first column)."""
    text = DOC.read_text()
    section = text[text.index("## Module map") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"^\| `((?:beam_jobs|tfdata_reader)/[\w/]+\.py)` \|", section, re.M)


def _modules() -> list[str]:
    found = []
    for package in ("beam_jobs", "tfdata_reader"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative.name == "__init__.py" and relative.parent.name != package:
                continue  # a folder's __init__ holds its docstring only
            found.append(relative.as_posix())
    return found


def test_every_module_is_in_the_map():
    assert sorted(set(_modules()) - set(_mapped())) == []


def test_every_module_in_the_map_exists():
    mapped = _mapped()
    assert len(mapped) == len(set(mapped))
    assert sorted(m for m in mapped if not (ROOT / m).is_file()) == []


def test_package_folders_hold_only_a_docstring_in_their_init():
    for package in ("beam_jobs", "tfdata_reader"):
        for init in sorted((ROOT / package).rglob("*/__init__.py")):
            text = init.read_text().strip()
            assert text.startswith('"""') and text.endswith('"""') and text.count('"""') == 2, init
