"""Reproducible datasets: the same inputs and options give byte-identical shards, run after run.

Each conversion runs twice as its own process, with other `PYTHONHASHSEED`s and another worker
count and running mode of the local runner; every file of the two outputs must be the same
bytes, and the manifests the same apart from the creation time and the options given."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.inputs import example, png

_SLICES = ["--compression=gzip", "--splits=train=2,eval=1"]
_RUNS = {
    "one worker": ("11", ["--direct_num_workers=1", "--direct_running_mode=in_memory"]),
    "two threads": ("2024", ["--direct_num_workers=2", "--direct_running_mode=multi_threading"]),
    "two processes": (
        "random",
        ["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
    ),
}


def _csv(folder: pathlib.Path) -> list[str]:
    rng = np.random.default_rng(1)
    for part in range(3):
        lines = ["id,score,name,day,note"]
        for i in range(part * 900, part * 900 + 900):
            score = "" if i % 13 == 0 else f"{rng.normal():.6f}"
            lines.append(f'{i},{score},"n, {i}",2026-11-{1 + i % 28:02d},é{i % 7}')
        (folder / f"part{part}.csv").write_text("\n".join(lines) + "\n")
    return ["--input", str(folder / "*.csv")]


def _jsonl(folder: pathlib.Path) -> list[str]:
    rows = [
        {"id": i, "tags": [f"t{j}" for j in range(i % 4)], "pos": {"x": i / 7, "y": -i},
         "maybe": None if i % 5 == 0 else i * 3}
        for i in range(2500)
    ]  # fmt: skip
    for part in range(2):
        text = "".join(json.dumps(r) + "\n" for r in rows[part::2])
        (folder / f"part{part}.jsonl").write_text(text)
    return ["--input", str(folder / "*.jsonl")]


def _parquet(folder: pathlib.Path) -> list[str]:
    for part in range(2):
        ids = np.arange(part * 1500, part * 1500 + 1500)
        table = pa.table(
            {
                "id": ids,
                "values": pa.array([[float(i)] * (i % 3) for i in ids], pa.list_(pa.float64())),
                "name": pa.array([None if i % 9 == 0 else f"n{i}" for i in ids]),
            }
        )
        pq.write_table(table, folder / f"part{part}.parquet", row_group_size=400)
    return ["--input", str(folder / "*.parquet")]


def _text(folder: pathlib.Path) -> list[str]:
    for part in range(2):
        lines = [f"line {i} of part {part}, ünïcode" for i in range(2000)]
        (folder / f"part{part}.txt").write_text("\n".join(lines) + "\n")
    return ["--input", str(folder / "*.txt")]


def _tfrecord(folder: pathlib.Path) -> list[str]:
    import tensorflow as tf

    for part in range(2):
        with tf.io.TFRecordWriter(str(folder / f"part{part}.tfrecord")) as writer:
            for i in range(part * 1500, part * 1500 + 1500):
                writer.write(example(i))
    return ["--input", str(folder / "*.tfrecord")]


def _images(folder: pathlib.Path) -> list[str]:
    rng = np.random.default_rng(2)
    for i in range(60):
        label = folder / "imgs" / ("cat", "dog", "owl")[i % 3]
        label.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, size=(16, 16, 3), dtype=np.uint8)
        (label / f"{i:03d}.png").write_bytes(png(pixels))
    return ["--input", str(folder / "imgs"), "--format=images"]


_FORMATS = {
    "csv": (_csv, "16KiB"),
    "jsonl": (_jsonl, "16KiB"),
    "parquet": (_parquet, "16KiB"),
    "text": (_text, "16KiB"),
    "tfrecord": (_tfrecord, "16KiB"),
    "images": (_images, "8KiB"),
}


def _convert(workdir: pathlib.Path, out: str, seed: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--output", out, *args]
    result = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _files(folder: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def _manifest(folder: pathlib.Path) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.pop("created")
    manifest["options"] = {k: v for k, v in manifest["options"].items() if k != "output"}
    return manifest


def _manifest_differences(a: pathlib.Path, b: pathlib.Path) -> dict:
    """What differs between two outputs' manifests, entry by entry (shards by position): a
    failure says where two runs parted, not only that their fingerprints did."""
    manifest_a, manifest_b = _manifest(a), _manifest(b)
    found: dict = {}
    for key in sorted(set(manifest_a) | set(manifest_b)):
        value_a, value_b = manifest_a.get(key), manifest_b.get(key)
        if value_a == value_b:
            continue
        if isinstance(value_a, list) and isinstance(value_b, list):
            pairs = list(zip(value_a, value_b, strict=False))
            found[key] = [p for p in pairs if p[0] != p[1]] + [len(value_a), len(value_b)]
        elif isinstance(value_a, dict) and isinstance(value_b, dict):
            names = set(value_a) | set(value_b)
            found[key] = {
                k: (value_a.get(k), value_b.get(k))
                for k in sorted(names)
                if value_a.get(k) != value_b.get(k)
            }
        else:
            found[key] = (value_a, value_b)
    return found


def _assert_same(a: pathlib.Path, b: pathlib.Path) -> None:
    files_a, files_b = _files(a), _files(b)
    assert sorted(files_a) == sorted(files_b)
    different = [name for name in files_a if files_a[name] != files_b[name]]
    assert not different, f"{different} differ"
    manifest_a, manifest_b = _manifest(a), _manifest(b)
    options_a, options_b = manifest_a["options"], manifest_b["options"]
    # Named one by one: a difference once seen under load showed only as 'options' differ.
    assert {k: (v, options_b.get(k)) for k, v in options_a.items() if options_b.get(k) != v} == {}
    assert manifest_a == manifest_b


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(_FORMATS))
def test_reruns_write_byte_identical_shards(fmt, tmp_path):
    make_input, target = _FORMATS[fmt]
    (tmp_path / "in").mkdir()
    args = [*make_input(tmp_path / "in"), f"--target_shard_bytes={target}", *_SLICES]
    # Worker processes take seconds to start: CSV alone runs in them.
    seed_a, mode_a = _RUNS["one worker"]
    seed_b, mode_b = _RUNS["two processes" if fmt == "csv" else "two threads"]
    status_a = _convert(tmp_path, "a", seed_a, *args, *mode_a)
    status_b = _convert(tmp_path, "b", seed_b, *args, *mode_b)
    assert status_a["shards"] >= 3, status_a
    if status_a["fingerprint"] != status_b["fingerprint"]:
        differences = _manifest_differences(tmp_path / "a", tmp_path / "b")
        pytest.fail(f"the two runs' datasets differ: {differences}")
    _assert_same(tmp_path / "a", tmp_path / "b")


@pytest.mark.slow
def test_plain_reruns_match_and_diff_names_a_changed_value(tmp_path):
    (tmp_path / "in").mkdir()
    args = [*_csv(tmp_path / "in"), "--target_shard_bytes=16KiB"]
    status_a = _convert(tmp_path, "a", "1", *args)
    status_b = _convert(tmp_path, "b", "2", *args, *_RUNS["two threads"][1])
    assert status_a["fingerprint"] == status_b["fingerprint"]
    _assert_same(tmp_path / "a", tmp_path / "b")

    part = tmp_path / "in" / "part1.csv"
    lines = part.read_text().splitlines()
    row = lines.index(next(line for line in lines if line.startswith("1234,")))
    cells = lines[row].split(",")
    old_score, cells[1] = cells[1], "7.5"
    lines[row] = ",".join(cells)
    part.write_text("\n".join(lines) + "\n")
    status_c = _convert(tmp_path, "c", "3", *args)
    assert status_c["fingerprint"] != status_a["fingerprint"]
    diff = subprocess.run(
        [sys.executable, "-m", "beam_jobs", "diff", "a", "c"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert diff.returncode == 1, diff.stderr
    assert "score" in diff.stdout and "7.5" in diff.stdout, diff.stdout
    assert f"{float(np.float32(old_score))}"[:6] in diff.stdout, diff.stdout
