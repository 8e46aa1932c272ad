"""`__all__` says what a module offers: every function and class it defines without a leading
underscore is listed, and everything listed exists."""

from __future__ import annotations

import importlib
import inspect
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _modules() -> list[str]:
    found = []
    for package in ("beam_jobs", "tfdata_reader"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] in ("__init__", "__main__") or parts[-1].startswith("_"):
                continue
            found.append(".".join(parts))
    return found


@pytest.mark.parametrize("name", _modules())
def test_all_lists_the_public_functions_and_classes(name):
    module = importlib.import_module(name)
    listed = getattr(module, "__all__", None)
    assert listed is not None, f"{name} has no __all__"
    assert sorted(n for n in listed if not hasattr(module, n)) == []
    defined = sorted(
        n
        for n, value in vars(module).items()
        if not n.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == name
    )
    assert sorted(set(defined) - set(listed)) == []
