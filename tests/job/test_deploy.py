"""What can be checked of deploy/ without a cloud: files parse, flags match, paths exist."""

from __future__ import annotations

import json
import pathlib
import py_compile
import re
import subprocess

import apache_beam as beam
import pytest
import yaml
from apache_beam.options.pipeline_options import PipelineOptions

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core import flags
from beam_jobs.job.argv import check_beam_args, split_argv
from beam_jobs.plan.conversion import make_plan
from beam_jobs.transforms.convert_to_shards import ConvertToShards

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _cli_flags() -> dict[str, flags.Flag]:
    return {f.name: f for f in flags.flags(ConvertConfig)}


def test_every_json_and_yaml_file_parses():
    files = sorted(DEPLOY.rglob("*.json")) + sorted(DEPLOY.rglob("*.yaml"))
    assert len(files) == 3
    for path in files:
        if path.suffix == ".json":
            json.loads(path.read_text())
        else:
            assert all(doc for doc in yaml.safe_load_all(path.read_text()))


def test_metadata_parameters_are_the_cli_flags():
    metadata = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
    names = [p["name"] for p in metadata["parameters"]]
    assert len(names) == len(set(names))
    # --wait is fixed to false by the template's launcher (main.py), so it is no parameter, and
    # neither are --progress_seconds and --stall_seconds (a launcher that does not wait reports
    # no progress and watches none) nor --dry_run (a template is launched to convert; a plan is
    # looked at with the CLI).
    cli = _cli_flags()
    assert set(names) == set(cli) - {"wait", "progress_seconds", "stall_seconds", "dry_run"}
    for parameter in metadata["parameters"]:
        # The template's help is the flag table's, word for word: it cannot drift.
        assert parameter["helpText"] == cli[parameter["name"]].help, parameter["name"]
        assert parameter["regexes"]
        for regex in parameter["regexes"]:
            re.compile(regex)


@pytest.mark.parametrize(
    "name, good, bad",
    [
        ("target_shard_bytes", ["256MiB", "100MB", "1GiB", "4096"], ["big", "-1MB"]),
        ("compression", ["none", "gzip"], ["zip"]),
        ("run_date", ["2026-12-01"], ["12/01/2026"]),
        ("max_bad_fraction", ["0.001", "0", "1"], ["2", "-0.1"]),
    ],
)
def test_metadata_regexes(name, good, bad):
    metadata = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
    [regex] = next(p["regexes"] for p in metadata["parameters"] if p["name"] == name)
    assert all(re.match(regex, value) for value in good)
    assert not any(re.match(regex, value) for value in bad)


def test_every_path_the_dockerfile_copies_exists():
    sources = []
    for line in (DEPLOY / "dataflow" / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources.extend(line.split()[1:-1])
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source


def test_scripts_and_dag_are_well_formed():
    for script in sorted(DEPLOY.rglob("*.sh")):
        subprocess.run(["bash", "-n", str(script)], check=True)
    py_compile.compile(str(DEPLOY / "scheduler" / "airflow_dag.py"), doraise=True)
    py_compile.compile(str(DEPLOY / "dataflow" / "main.py"), doraise=True)
    cronjob = yaml.safe_load((DEPLOY / "flink" / "cronjob.yaml").read_text())
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"


def test_flink_cronjob_submits_an_uber_jar_for_the_clusters_version_and_size():
    """The four things that would stop the Flink deployment on a real cluster."""
    from apache_beam.options.pipeline_options import FlinkRunnerOptions

    session = yaml.safe_load((DEPLOY / "flink" / "flink-session.yaml").read_text())
    cronjob = yaml.safe_load((DEPLOY / "flink" / "cronjob.yaml").read_text())
    [container] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    flink = PipelineOptions(args).view_as(FlinkRunnerOptions)
    # 1. Beam builds for the cluster's Flink version (v1_19 -> 1.19), not its default 2.2.
    assert session["spec"]["flinkVersion"] == "v" + flink.flink_version.replace(".", "_")
    # 2, 3. An uber jar over REST: no `java -jar` job server in the pod (which has no Java),
    # and no job-server artifact folder that the task managers cannot see.
    assert flink.flink_submit_uber_jar
    jar = pathlib.PurePosixPath(flink.flink_job_server_jar)
    assert jar.name == f"beam-runners-flink-{flink.flink_version}-job-server-{beam.__version__}.jar"
    dockerfile = (DEPLOY / "flink" / "Dockerfile").read_text()
    [add] = [line for line in dockerfile.splitlines() if line.startswith("ADD ")]
    assert add.split()[-1] == f"{jar.parent}/"
    assert "ARG FLINK_VERSION=" + flink.flink_version in dockerfile
    assert "ARG BEAM_VERSION=" + beam.__version__ in dockerfile
    assert container["image"].rsplit(":", 1)[0].endswith("/tfrecord-etl-flink")
    # 4. Every task slot busy: parallelism = task managers x slots.
    task_managers = session["spec"]["taskManager"]["replicas"]
    slots = int(session["spec"]["flinkConfiguration"]["taskmanager.numberOfTaskSlots"])
    assert flink.parallelism == task_managers * slots
    ours, beams = split_argv(args)  # our own flags parse too, and Beam's are all known
    check_beam_args(beams)
    ConvertConfig.from_flags(ours)


def test_pipeline_builds_for_dataflow_without_running(sample_csv, monkeypatch):
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    # Validation would ask Cloud Storage about the temp bucket; there is no network here.
    monkeypatch.setattr(
        GoogleCloudOptions, "_warn_if_soft_delete_policy_enabled", lambda *a, **k: None
    )
    argv = [
        "--input",
        sample_csv[0],
        "--output",
        "gs://bucket/ds/{date}",
        "--run_date",
        "2026-12-01",
        "--runner=DataflowRunner",
        "--project=my-project-123",
        "--region=europe-west1",
        "--temp_location=gs://bucket/tmp",
    ]
    ours, beams = split_argv(argv)
    options = PipelineOptions(beams)
    config = ConvertConfig.from_flags(ours)
    assert config.output == "gs://bucket/ds/2026-12-01"
    plan = make_plan(config)
    pipeline = beam.Pipeline(runner="DataflowRunner", options=options)
    _ = pipeline | "ConvertToShards" >> ConvertToShards(plan, config, "test")
    transforms = pipeline.to_runner_api().components.transforms.values()
    names = {t.unique_name for t in transforms}
    for step in ("ListShards", "WriteShards", "Publish"):
        assert f"ConvertToShards/{step}" in names
