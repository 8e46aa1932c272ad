"""Reading a shuffled dataset in its epoch order: random batches from any input order, the same
global steps on any number of input pipelines, every record once an epoch, resumable from a
`ReadPosition` on another number of pipelines; and a dataset in input order said so."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from support.datasets import convert

from tfdata_reader import ReadPosition, make_dataset, steps_per_epoch

ROWS = 12_000
LABELS = 40


@pytest.fixture(scope="module")
def sorted_input(tmp_path_factory):
    """A CSV sorted by its label (40 labels, 300 rows each)."""
    folder = tmp_path_factory.mktemp("sorted")
    lines = ["id,label,x"] + [f"{i},{i * LABELS // ROWS},{i / 3:.3f}" for i in range(ROWS)]
    (folder / "in.csv").write_text("\n".join(lines) + "\n")
    return folder / "in.csv"


@pytest.fixture(scope="module")
def datasets(sorted_input, tmp_path_factory):
    """The input converted: shuffled into 1 and 7 shards (plain) and 3 (GZIP), and in input
    order."""
    folder = tmp_path_factory.mktemp("converted")
    found = {}
    for name, flags in {
        "one": ["--num_shards=1"],
        "seven": ["--num_shards=7"],
        "gzip": ["--num_shards=3", "--compression=gzip"],
        "input": ["--num_shards=4", "--order=input"],
    }.items():
        convert([str(sorted_input)], folder / name, *flags)
        found[name] = folder / name
    return found


def _batches(ds) -> list[list[int]]:
    return [b["id"].numpy().tolist() for b in ds]


def _random_labels(batch: int) -> float:
    rng = np.random.default_rng(0)
    ids = [rng.choice(ROWS, batch, replace=False) for _ in range(200)]
    return float(np.mean([len(set(i * LABELS // ROWS)) for i in ids]))


@pytest.mark.parametrize("name", ["one", "seven", "gzip"])
def test_batches_of_a_sorted_input_mix_labels_and_positions_as_random_ones_do(datasets, name):
    batches = _batches(make_dataset(str(datasets[name]), 128, features=["id"], label_key=""))
    full = [np.array(b) for b in batches if len(b) == 128]
    labels = np.mean([len(set(b * LABELS // ROWS)) for b in full])
    assert labels >= 0.9 * _random_labels(128), (name, labels)
    spread = np.mean([np.std(b) for b in full])
    assert spread >= 0.9 * np.std(np.arange(ROWS)), (name, spread)
    assert sorted(i for b in batches for i in b) == list(range(ROWS))


def test_a_dataset_in_input_order_is_said_to_give_batches_in_that_order(datasets, caplog):
    with caplog.at_level(logging.WARNING, logger="tfdata_reader.dataset"):
        make_dataset(str(datasets["input"]), 128)
        make_dataset(str(datasets["input"]), 64)
    said = [r.getMessage() for r in caplog.records if "input's order" in r.getMessage()]
    assert len(said) == 1 and "convert it again without --order input" in said[0]
    # A buffer a tenth of the data (the default's 10,000 records of a 100,000-row input).
    ds = make_dataset(str(datasets["input"]), 128, features=["id"], seed=3,
                      shuffle_buffer_size=1200, shuffle_window=512)  # fmt: skip
    labels = np.mean([len(set(np.array(b) * LABELS // ROWS)) for b in _batches(ds)])
    assert labels < 0.5 * _random_labels(128)  # what a buffer gives a sorted input


def _steps(path, global_batch: int, pipelines: int, **options) -> list[list[int]]:
    """Each global step's records (sorted), reading with `pipelines` input pipelines of one
    replica each."""
    per = []
    for i in range(pipelines):
        context = tf.distribute.InputContext(pipelines, i, pipelines)
        ds = make_dataset(str(path), global_batch // pipelines, features=["id"],
                          input_context=context, **options)  # fmt: skip
        per.append(_batches(ds))
        assert ds.cardinality().numpy() in (len(per[-1]), -2)
    steps = max(len(p) for p in per)
    return [sorted(i for p in per if s < len(p) for i in p[s]) for s in range(steps)]


@pytest.mark.parametrize("name", ["seven", "gzip"])
def test_a_global_step_holds_the_same_records_on_1_2_and_8_pipelines(datasets, name):
    reference = _steps(datasets[name], 256, 1, seed=5)
    assert sorted(i for s in reference for i in s) == list(range(ROWS))
    assert all(len(s) == 256 for s in reference[:-1])
    for pipelines in (2, 8):  # every count: test_order.py (the plan)
        assert _steps(datasets[name], 256, pipelines, seed=5) == reference, pipelines


def test_each_epoch_has_its_own_order_a_function_of_seed_and_epoch(datasets):
    path = str(datasets["seven"])
    two = _batches(make_dataset(path, 256, features=["id"], seed=1, num_epochs=2))
    epoch = steps_per_epoch(path, 256)
    assert len(two) == 2 * epoch
    first, second = two[:epoch], two[epoch:]
    assert sorted(i for b in first for i in b) == sorted(i for b in second for i in b)
    assert first != second
    assert _batches(make_dataset(path, 256, features=["id"], seed=1, start_epoch=1)) == second
    assert _batches(make_dataset(path, 256, features=["id"], seed=2)) != first
    # Iterating one dataset again reads the next epoch (Keras does, each of its epochs).
    ds = make_dataset(path, 256, features=["id"], seed=1)
    assert _batches(ds) == first and _batches(ds) == second


def _meet_again(first: list[list[int]], second: list[list[int]]) -> float:
    """Of the pairs of records in one batch of `first`, the share in one batch of `second`."""
    batch_of = {r: b for b, batch in enumerate(second) for r in batch}
    pairs = met = 0
    for batch in first:
        later = [batch_of[r] for r in batch]
        pairs += len(later) * (len(later) - 1) // 2
        met += sum(n * (n - 1) // 2 for n in np.unique(later, return_counts=True)[1])
    return met / pairs


@pytest.mark.parametrize("name, most", [("one", 1.2), ("seven", 1.2), ("gzip", 1.2)])
def test_batches_are_drawn_anew_each_epoch(datasets, name, most):
    """Batch-mates of one epoch share a batch in the next about as often as with a full
    reshuffle ((G - 1) / (N - 1)); a window of a few steps (4 KiB for 256 records of about
    28 bytes: 1 step, as chunks read as they lie) meets again more than 3x as often."""
    path = str(datasets[name])
    epochs = _batches(make_dataset(path, 256, features=["id"], seed=2, num_epochs=3))
    steps = steps_per_epoch(path, 256)
    one, two, three = (epochs[k * steps : (k + 1) * steps] for k in range(3))
    full = 255 / (ROWS - 1)
    ratios = [_meet_again(one, two) / full, _meet_again(two, three) / full]
    assert max(ratios) <= most, ratios
    small = _batches(make_dataset(path, 256, features=["id"], seed=2, num_epochs=2,
                                  reshuffle_bytes=4096))  # fmt: skip
    assert _meet_again(small[:steps], small[steps:]) / full > 3


@pytest.mark.parametrize("before, after", [(2, 4), (4, 1), (1, 8)])
def test_resuming_from_a_position_on_another_pipeline_count_continues_the_epoch(
    datasets, before, after
):
    path = datasets["seven"]
    reference = _steps(path, 256, 1, seed=5)
    done = 17
    position = ReadPosition.from_dict({"epoch": 0, "step": done})
    assert position.as_dict() == {"epoch": 0, "step": done}
    resumed = _steps(path, 256, after, seed=5, start_step=done)
    assert _steps(path, 256, before, seed=5)[:done] + resumed == reference


def test_a_position_moves_on_with_training_and_rolls_into_the_next_epoch(datasets):
    path = str(datasets["seven"])
    position = ReadPosition()
    ds = make_dataset(path, 256, features=["id"], seed=1, position=position)
    epoch = steps_per_epoch(path, 256)
    assert position.steps_per_epoch == epoch
    whole = _batches(make_dataset(path, 256, features=["id"], seed=1, num_epochs=2))
    seen = []
    for batch in ds.take(10):
        seen.append(batch["id"].numpy().tolist())
        position.advance()
    checkpoint = tf.train.Checkpoint(position=position)
    saved = checkpoint.save(str(datasets["seven"].parent / "ckpt" / "c"))
    fresh = ReadPosition()
    tf.train.Checkpoint(position=fresh).restore(saved)
    state = fresh.as_dict()  # mid-epoch: with the dataset it was read from
    assert state["weights"] == {
        "epoch": 0,
        "sources": [f"{path}/manifest.json"],
        "segments": [[0, None]],
    }
    assert {k: state[k] for k in ("epoch", "step")} == {"epoch": 0, "step": 10}
    rest = make_dataset(path, 256, features=["id"], seed=1, position=fresh)
    for batch in rest:
        seen.append(batch["id"].numpy().tolist())
        fresh.advance()
    assert fresh.as_dict() == {"epoch": 1, "step": 0}
    seen += _batches(rest)  # the next iteration: epoch 1
    assert seen == whole


def test_options_of_the_order_are_checked(datasets):
    path = str(datasets["seven"])
    with pytest.raises(ValueError, match="streams=3 must divide the global batch"):
        make_dataset(path, 256, streams=3)
    with pytest.raises(ValueError, match="start_step 999 is past the epoch"):
        list(make_dataset(path, 256, start_step=999).take(1))
    # Where there is no epoch order, a position or a start step is refused, not ignored.
    refused = "position=, start_epoch and start_step resume the epoch order"
    for where, options in (
        (str(datasets["input"]), {"position": ReadPosition()}),
        (str(datasets["input"]), {"start_step": 2}),
        (path, {"start_step": 2, "shuffle": False}),
        (path, {"start_epoch": 1, "cache": True}),
    ):
        with pytest.raises(ValueError, match=refused):
            make_dataset(where, 256, **options)
    # A position outside the order, or an epoch of no step, is refused when the dataset is made.
    steps = steps_per_epoch(path, 256)
    assert steps == 47
    for epoch, step in ((-1, 0), (0, -1), (0, steps), (0, steps + 1)):
        with pytest.raises(
            ValueError, match=rf"position \(epoch {epoch}, step {step}\) is outside"
        ):
            make_dataset(path, 256, position=_moved(ReadPosition(), epoch, step))
    with pytest.raises(ValueError, match="an epoch has no step: 12000 records are fewer"):
        make_dataset(path, 20_000, drop_remainder=True, num_epochs=None)


def _moved(position: ReadPosition, epoch: int, step: int) -> ReadPosition:
    position.epoch.assign(epoch)
    position.step.assign(step)
    return position


def test_the_reader_s_edges_are_clear_errors_when_the_dataset_or_position_is_made(datasets):
    path = str(datasets["seven"])
    # The epoch's last step is 46: a start step of 47 (the epoch's end) is past it.
    with pytest.raises(ValueError, match=r"start_step 47 is past the epoch's last step: its "
                       r"steps are 0..46 \(12000 records, global batch 256\)"):  # fmt: skip
        make_dataset(path, 256, start_step=47)
    with pytest.raises(ValueError, match="give a position= or start_epoch/start_step, not both"):
        make_dataset(path, 256, position=ReadPosition(), start_step=3)
    for epoch, step in ((-1, 0), (0, -2)):
        with pytest.raises(ValueError, match=r"a ReadPosition's epoch and step count from 0"):
            ReadPosition(epoch, step)
    for seed in (-1, 2**63, 2**64, 1.5, True):
        with pytest.raises(ValueError, match=r"seed must be None or a whole number 0 to 2\*\*63-1"):
            make_dataset(path, 256, seed=seed)
    assert _batches(make_dataset(path, 256, features=["id"], seed=np.int64(3))) == _batches(
        make_dataset(path, 256, features=["id"], seed=3)
    )
    # A position moved out of the order after the dataset was made: one clear line, naming it.
    position = ReadPosition()
    ds = make_dataset(path, 256, features=["id"], position=position)
    for epoch, step in ((-1, 0), (0, 47), (0, -3)):
        _moved(position, epoch, step)
        with pytest.raises(tf.errors.InvalidArgumentError) as raised:
            next(iter(ds))
        assert (
            f"the position (epoch {epoch}, step {step}) is outside the dataset: an epoch has "
            "steps 0..46 (12000 records, global batch 256), and epochs count from 0"
        ) in str(raised.value)
    # label_key="" (no label) with several datasets and a feature list.
    both = [path, str(datasets["gzip"])]
    with pytest.raises(ValueError, match="compression"):  # these two differ in compression
        make_dataset(both, 256, features=["id"], label_key="")
    one = [path, path + "/"]
    first = next(iter(make_dataset(one, 256, features=["id"], label_key="")))
    assert list(first) == ["id"]


def test_pipelines_that_do_not_divide_the_streams_log_nothing(datasets, tmp_path):
    """Two pipelines of a global batch of 96 (3 streams): each cuts a stream's chunks (the
    reader once logged about 1,000 TensorFlow "RefCount" error lines an epoch here)."""
    script = tmp_path / "read.py"
    script.write_text(
        "import tensorflow as tf\n"
        "from tfdata_reader import make_dataset\n"
        "n = 0\n"
        "for i in range(2):\n"
        "    ctx = tf.distribute.InputContext(2, i, 2)\n"
        f"    ds = make_dataset({str(datasets['seven'])!r}, 48, features=['id'], "
        "input_context=ctx, num_epochs=2)\n"
        "    n += sum(int(b['id'].shape[0]) for b in ds)\n"
        "print(n)\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["24000"]
    assert [line for line in done.stderr.splitlines() if "RefCount" in line] == []


def test_the_default_seed_is_seed_0_in_every_step_and_on_resuming(datasets):
    # The seed left out reads the order of seed 0, batches in order (parsing runs in
    # parallel; a relaxed order once handed batches out as they were ready).
    path = datasets["seven"]
    reference = _steps(path, 64, 1, seed=0)
    assert _steps(path, 64, 1) == reference
    assert _steps(path, 64, 4) == reference
    assert _steps(path, 64, 2)[:40] + _steps(path, 64, 4, start_step=40) == reference
