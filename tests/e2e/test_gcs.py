"""gs:// end to end against a local Cloud Storage emulator (traffic to 127.0.0.1 only).

convert gs:// -> gs:// and local -> gs://, `verify`, `inspect` and `report` on gs://, and the
tf.data reader on gs:// shards through TensorFlow's own GCS file system (via a local TLS proxy).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import google_crc32c
import pytest
from support.datasets import SUPPORT
from support.gcs import BUCKET, TlsProxy, beam_env, storage_emulator, tensorflow_env

from beam_jobs.publish.companions import COMPANION_NAMES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gcs(tmp_path_factory, sample_csv):
    """(emulator URL, proxy, storage client); the sample CSV uploaded to gs://BUCKET/raw/."""
    with storage_emulator() as emulator:
        os.environ["STORAGE_EMULATOR_HOST"] = emulator
        from google.cloud import storage

        client = storage.Client.create_anonymous_client()
        for path in sample_csv:
            blob = client.bucket(BUCKET).blob(f"raw/{pathlib.Path(path).name}")
            blob.upload_from_filename(path)
        proxy = TlsProxy(emulator, tmp_path_factory.mktemp("tls"))
        try:
            yield emulator, proxy, client
        finally:
            proxy.close()
            del os.environ["STORAGE_EMULATOR_HOST"]


def cli(emulator: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SUPPORT / "emulated_gcs_main.py"), *args],
        env=beam_env(emulator),
        capture_output=True,
        text=True,
        timeout=300,
    )


def convert_flags(*args: str) -> list[str]:
    return ["convert", *args, "--direct_running_mode=in_memory", "--direct_num_workers=1"]


def names(client, prefix: str) -> list[str]:
    return sorted(b.name[len(prefix) :] for b in client.list_blobs(BUCKET, prefix=prefix))


def read_ids(proxy: TlsProxy, path: str, *args: str) -> dict[str, list[int]]:
    """{split or "": ids} read by TensorFlow's gs:// file system (`support/read_gs_ids.py`)."""
    result = subprocess.run(
        [sys.executable, str(SUPPORT / "read_gs_ids.py"), path, *args],
        env=tensorflow_env(proxy),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_gs_to_gs_convert_verify_inspect_rerun_and_read(gcs, tmp_path):
    emulator, proxy, client = gcs
    out = f"gs://{BUCKET}/ds/{{date}}"
    flags = ["--input", f"gs://{BUCKET}/raw/*.csv", "--output", out, "--run_date=2026-12-01"]
    flags += ["--target_shard_bytes=256KiB"]
    first = cli(emulator, *convert_flags(*flags))
    assert first.returncode == 0, first.stderr[-3000:]
    summary = json.loads(first.stdout.splitlines()[-1])
    assert (summary["status"], summary["records_written"]) == ("ok", 12000)
    listed = names(client, "ds/2026-12-01/")
    shards = [n for n in listed if n.startswith("data-")]
    assert listed == [*shards, *sorted(["manifest.json", *COMPANION_NAMES])]  # no temporaries
    assert len(shards) == summary["shards"]
    # The manifest is written last: no shard object is newer.
    blobs = {b.name: b for b in client.list_blobs(BUCKET, prefix="ds/2026-12-01/")}
    manifest_blob = blobs.pop("ds/2026-12-01/manifest.json")
    assert all(b.updated <= manifest_blob.updated for b in blobs.values())
    manifest = json.loads(manifest_blob.download_as_bytes())
    for shard in manifest["shards"]:
        data = client.bucket(BUCKET).blob(f"ds/2026-12-01/{shard['path']}").download_as_bytes()
        assert (len(data), f"{google_crc32c.value(data):08x}") == (shard["bytes"], shard["crc32c"])

    verified = cli(emulator, "verify", f"gs://{BUCKET}/ds/2026-12-01")
    assert verified.returncode == 0, verified.stderr[-3000:]
    assert verified.stdout.startswith(f"verify ok: {len(shards)} shards, 12,000 records")
    inspected = cli(emulator, "inspect", f"gs://{BUCKET}/ds/2026-12-01")
    assert "records      12,000" in inspected.stdout
    stats = cli(emulator, "inspect", f"gs://{BUCKET}/ds/2026-12-01", "--stats")
    assert stats.stdout.startswith("All Examples: 12,000 records"), stats.stderr[-3000:]
    page = tmp_path / "report.html"
    reported = cli(emulator, "report", f"gs://{BUCKET}/ds/2026-12-01", "-o", str(page))
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert "12,000" in page.read_text() and 'data-feature="city"' in page.read_text()
    again = cli(emulator, *convert_flags(*flags))
    assert json.loads(again.stdout.splitlines()[-1])["status"] == "already_converted"

    ids = read_ids(proxy, f"gs://{BUCKET}/ds/2026-12-01")[""]
    assert sorted(ids) == list(range(12000))


def test_local_to_gs_with_splits_and_a_corrupted_shard(gcs, sample_csv):
    emulator, proxy, client = gcs
    out = f"gs://{BUCKET}/split_ds"
    flags = ["--input", str(pathlib.Path(sample_csv[0]).parent / "*.csv"), "--output", out]
    flags += ["--splits=train=75,eval=25", "--split_key=id", "--compression=gzip"]
    result = cli(emulator, *convert_flags(*flags))
    assert result.returncode == 0, result.stderr[-3000:]
    read = read_ids(proxy, out, "--input_order", "train", "eval")
    train, evaluation = read["train"], read["eval"]
    assert sorted(train + evaluation) == list(range(12000))
    assert not set(train) & set(evaluation)

    manifest = json.loads(client.bucket(BUCKET).blob("split_ds/manifest.json").download_as_bytes())
    victim = manifest["shards"][-1]["path"]
    blob = client.bucket(BUCKET).blob(f"split_ds/{victim}")
    data = bytearray(blob.download_as_bytes())
    data[len(data) // 2] ^= 0x20
    blob.upload_from_string(bytes(data))
    verified = cli(emulator, "verify", out)
    assert verified.returncode == 1
    assert f"BAD {victim}: crc32c is" in verified.stdout


def test_two_conversions_into_one_gs_output_give_one_dataset_and_one_clear_error(gcs):
    emulator, proxy, client = gcs
    out = f"gs://{BUCKET}/contended"
    flags = ["--input", f"gs://{BUCKET}/raw/*.csv", "--output", out, "--overwrite"]
    argv = [sys.executable, str(SUPPORT / "emulated_gcs_main.py"), *convert_flags(*flags)]
    runs = [
        subprocess.Popen(
            argv, env=beam_env(emulator), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    results = [(r.wait(timeout=300), *r.communicate()) for r in runs]
    assert sorted(code for code, _, _ in results) == [0, 4], [e[-2000:] for _, _, e in results]
    (_, won, _), (_, _, lost) = sorted(results)
    assert "another conversion" in lost and out in lost
    assert json.loads(won.splitlines()[-1])["status"] == "ok"
    verified = cli(emulator, "verify", out)
    assert verified.returncode == 0, verified.stdout + verified.stderr[-2000:]
    assert sorted(read_ids(proxy, out, "--input_order")[""]) == list(range(12000))
    assert ".tfrecord-etl-lease.json" not in names(client, "contended/")


STAMP_TWICE = """
import sys, time
from apache_beam.internal.gcp import auth
auth._Credentials._credentials_init = True
auth._Credentials._credentials = None
from google.cloud import storage
from beam_jobs.core.inputs import stamp_of
blob = storage.Client.create_anonymous_client().bucket(sys.argv[1]).blob("stamp/x.csv")
blob.upload_from_string(b"a\\n1\\n")
path = "gs://" + sys.argv[1] + "/stamp/x.csv"
first = stamp_of(path)
time.sleep(1.1)
blob.upload_from_string(b"a\\n2\\n")  # a new generation of the same size
print(first == stamp_of(path), first.size)
"""


def test_a_new_generation_of_a_gs_object_changes_its_stamp(gcs):
    """The writers' mid-run check on gs:// rests on the object's update time changing with
    each generation, the size alone being the same here."""
    emulator, _, _ = gcs
    result = subprocess.run(
        [sys.executable, "-c", STAMP_TWICE, BUCKET],
        env=beam_env(emulator),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["False", "4"]


def test_a_failed_run_keeps_its_work_on_gs_and_the_same_command_resumes_it(gcs, sample_csv,
                                                                           tmp_path):  # fmt: skip
    """The work folder on Cloud Storage: a run whose write task 2 hangs is stopped (its stall
    limit), keeps its finished tasks there, and the same command reuses them into the bytes of
    an uninterrupted run."""
    from support.runs import hooked_env, status

    emulator, _, client = gcs
    flags = ["--input", sample_csv[0], "--target_shard_bytes=64KiB", "--stall_seconds=10"]
    here = cli(emulator, *convert_flags(*flags, "--output", str(tmp_path / "local")))
    assert here.returncode == 0, here.stderr[-3000:]
    out = f"gs://{BUCKET}/resumed"
    argv = [sys.executable, str(SUPPORT / "emulated_gcs_main.py"),
            *convert_flags(*flags, "--output", out)]  # fmt: skip
    hung = subprocess.run(argv, env={**hooked_env(TFRECORD_ETL_TEST_HANG="2"),
                                     **_emulator(emulator)},
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert hung.returncode == 3, hung.stderr[-3000:]
    kept = status(hung)
    folder = kept["kept_work"].removeprefix(f"gs://{BUCKET}/resumed/")
    records = [n for n in names(client, "resumed/") if n.startswith(folder + "/done/")]
    assert len(records) == kept["kept_tasks"] >= 1
    again = cli(emulator, *convert_flags(*flags, "--output", out))
    assert again.returncode == 0, again.stderr[-3000:]
    assert status(again)["fingerprint"] == status(here)["fingerprint"]
    assert status(again)["tasks_reused"] == kept["kept_tasks"]
    assert not [n for n in names(client, "resumed/") if n.startswith(".tfrecord-etl-tmp-")]


def _emulator(emulator: str) -> dict[str, str]:
    return {"STORAGE_EMULATOR_HOST": emulator, "NO_GCE_CHECK": "true"}
