"""Writes the real-like corpus: small files in the shapes real exports come in (run from this
folder; the files are committed, this is how they were made)."""

from __future__ import annotations

import csv
import datetime
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq

rng = random.Random(7)
CITIES = ["Zürich", "São Paulo", "Kraków", "Malmö", "Reykjavík", "Tromsø", "Łódź", "Nîmes"]


LATIN1 = [c for c in CITIES if c.isascii() or all(ord(ch) < 256 for ch in c)]


def _rows(n: int, cities: list[str] = CITIES) -> list[list[str]]:
    return [[str(i), cities[i % len(cities)], f"{rng.uniform(-90, 90):.4f}"] for i in range(n)]


def _write(name: str, rows, header=("id", "city", "lat"), delimiter=",", **options) -> None:
    encoding = options.pop("encoding", "utf-8")
    with open(name, "w", encoding=encoding, newline="") as f:
        writer = csv.writer(f, delimiter=delimiter, **options)
        if header:
            writer.writerow(header)
        writer.writerows(rows)


_write("cities.tsv", _rows(200), delimiter="\t")
_write("cities_semicolon.csv", _rows(200), delimiter=";")
_write("no_header.csv", _rows(200), header=None)
_write("bom_crlf.csv", _rows(200), encoding="utf-8-sig", lineterminator="\r\n")
_write("latin1.csv", _rows(200, LATIN1), header=("id", "città", "lat"), encoding="latin-1")
_write("duplicate_names.csv", _rows(20), header=("id", "city", "city"))
_write("zip_codes.csv", [[str(i), f"{rng.randrange(0, 99999):05d}", "01" if i % 2 else "10"]
                          for i in range(300)], header=("id", "zip", "fips"))  # fmt: skip
_write("flags.csv", [[str(i), rng.choice(["True", "False", "true", "false"])]
                      for i in range(300)], header=("id", "active"))  # fmt: skip
junk = [[str(i), "n/a" if i % 200 == 17 else f"{i * 1.25}"] for i in range(4000)]  # 0.5%
_write("junk_in_head.csv", junk, header=("id", "amount"))
start = datetime.datetime(2026, 1, 1, 8, 30)
stamps = [start + datetime.timedelta(hours=7 * i, seconds=i) for i in range(200)]
_write("dates.csv", [[str(i), s.date().isoformat(), s.isoformat()] for i, s in enumerate(stamps)],
       header=("id", "day", "at"))  # fmt: skip
with open("events.jsonl", "w") as f:
    for i, s in enumerate(stamps):
        f.write(json.dumps({"id": i, "at": s.isoformat(), "day": s.date().isoformat()}) + "\n")
with open("array.json", "w") as f:
    json.dump([{"id": i, "city": c} for i, c in enumerate(CITIES)], f, indent=2)
utc = [s.replace(tzinfo=datetime.timezone.utc) for s in stamps]
pq.write_table(
    pa.table(
        {
            "id": pa.array(range(200), pa.int64()),
            "day": pa.array([s.date() for s in stamps], pa.date32()),
            "at": pa.array(utc, pa.timestamp("ms", tz="UTC")),
        }
    ),
    "dates.parquet",
)
