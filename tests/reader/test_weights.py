"""Several sources read as one epoch order: each batch holds each source in its share, as a
random sample would; without weights every record once an epoch, with weights each source's
quota (repeated in a new order, or sampled anew each epoch); the same global steps on 1, 2, 4
and 8 pipelines; resumable from a position on another pipeline count."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from support.datasets import convert

from tfdata_reader import ReadPosition, make_dataset, steps_per_epoch
from tfdata_reader.mixing import quotas

# Three sources of unlike sizes, each sorted by a label that drifts from day to day; a
# source's ids are its index x 100,000 on.
SIZES = {"big": 6000, "mid": 1800, "small": 400}
TOTAL = sum(SIZES.values())


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("sources")
    found = {}
    for k, (name, n) in enumerate(SIZES.items()):
        rows = "".join(f"{k * 100_000 + i},{k + i * 4 // n}\n" for i in range(n))
        (root / f"{name}.csv").write_text("id,label\n" + rows)
        shards = "--num_shards=3" if name == "big" else "--num_shards=1"
        convert([str(root / f"{name}.csv")], root / name, shards)
        found[name] = str(root / name)
    convert([str(root / "mid.csv")], root / "input", "--order=input")
    found["input"] = str(root / "input")
    return found


def _batches(path, batch: int, **options) -> list[np.ndarray]:
    ds = make_dataset(path, batch, features=["id"], label_key="", **options)
    return [b["id"].numpy() for b in ds]


def _source(ids: np.ndarray) -> np.ndarray:
    return ids // 100_000


def _spread_ratios(batches: list[np.ndarray], shares: list[float]) -> list[float]:
    """Each source's spread of its share of a full batch, over random sampling's."""
    size = max(len(b) for b in batches)
    full = [b for b in batches if len(b) == size]
    found = []
    for k, p in enumerate(shares):
        if not p:
            continue
        share = np.array([np.mean(_source(b) == k) for b in full])
        found.append(float(np.std(share) / np.sqrt(p * (1 - p) / size)))
    return found


def test_a_list_of_sources_holds_each_in_its_share_of_every_batch_and_every_record_once(
    sources,
):
    path = [sources["big"], sources["mid"], sources["small"]]
    epochs = _batches(path, 128, num_epochs=2)
    steps = steps_per_epoch(path, 128)
    assert steps == -(-TOTAL // 128) and len(epochs) == 2 * steps
    every = sorted(k * 100_000 + i for k, n in enumerate(SIZES.values()) for i in range(n))
    for e in range(2):
        assert sorted(np.concatenate(epochs[e * steps : (e + 1) * steps]).tolist()) == every
    ratios = _spread_ratios(epochs, [n / TOTAL for n in SIZES.values()])
    assert all(0.67 <= r <= 1.5 for r in ratios), ratios


@pytest.mark.parametrize("weights", [(0.5, 0.3, 0.2), (1.0, 0.0, 3.0)])
def test_weights_give_each_source_its_quota_each_epoch_and_each_batch_its_share(sources, weights):
    path = dict(zip([sources[n] for n in SIZES], weights, strict=True))
    expected = quotas(list(SIZES.values()), weights).tolist()
    epochs = _batches(path, 128, num_epochs=3, seed=4)
    steps = steps_per_epoch(path, 128)
    assert len(epochs) == 3 * steps
    seen = []
    for e in range(3):
        ids = np.concatenate(epochs[e * steps : (e + 1) * steps])
        own = [ids[_source(ids) == k] for k in range(len(SIZES))]
        assert [len(o) for o in own] == expected
        for o, n, quota in zip(own, SIZES.values(), expected, strict=True):
            times = set(np.unique(o, return_counts=True)[1].tolist())
            if quota >= n:  # whole passes and part of one: each record that often, or once more
                assert times <= {quota // n, quota // n + 1} and len(set(o.tolist())) == n
            else:  # sampled: no record twice
                assert times <= {1}
        seen.append([set(o.tolist()) for o in own])
    counts = zip(SIZES.values(), expected, strict=True)
    sampled = [k for k, (n, q) in enumerate(counts) if 0 < q < n]
    assert sampled and all(seen[0][k] != seen[1][k] for k in sampled)  # another sample
    shares = [q / TOTAL for q in expected]
    ratios = _spread_ratios(epochs, shares)
    assert all(0.67 <= r <= 1.5 for r in ratios), ratios


def _steps(path, global_batch: int, pipelines: int, **options) -> list[list[int]]:
    per = []
    for i in range(pipelines):
        context = tf.distribute.InputContext(pipelines, i, pipelines)
        per.append(_batches(path, global_batch // pipelines, input_context=context, **options))
    count = max(len(p) for p in per)
    return [sorted(i for p in per if s < len(p) for i in p[s].tolist()) for s in range(count)]


def test_weighted_steps_are_the_same_on_1_and_2_pipelines_and_resume_on_4(sources):
    path = {sources["big"]: 0.2, sources["mid"]: 0.5, sources["small"]: 0.3}
    reference = _steps(path, 256, 1, seed=9)
    assert len(reference) == -(-TOTAL // 256)
    # 8: the plan's tests (test_mixed.py) take every count; 4 below, resuming.
    assert _steps(path, 256, 2, seed=9) == reference
    done = 13
    resumed = _steps(path, 256, 4, seed=9, start_step=done)
    assert reference[:done] + resumed == reference
    position = ReadPosition.from_dict({"epoch": 0, "step": done})
    after = _batches(path, 256, seed=9, position=position)
    assert [sorted(b.tolist()) for b in after] == reference[done:]


def test_weights_are_checked_when_the_dataset_is_made(sources):
    big, mid = sources["big"], sources["mid"]
    with pytest.raises(ValueError, match=r"the weight of .*big must be a finite number at least 0"):
        make_dataset({big: -1.0, mid: 1.0}, 10)
    with pytest.raises(ValueError, match=r"the weight of .*mid must be a finite number"):
        make_dataset({big: 1.0, mid: float("nan")}, 10)
    with pytest.raises(ValueError, match=r"every weight is 0"):
        make_dataset({big: 0, mid: 0.0}, 10)
    with pytest.raises(ValueError, match=r"big is named by both"):
        make_dataset({big: 1.0, big + "/": 2.0}, 10)
    with pytest.raises(ValueError, match=r"datasets with weights are mixed .*input in input order"):
        make_dataset({big: 1.0, sources["input"]: 1.0}, 10)
    with pytest.raises(ValueError, match=r"the weight of .*big must be a finite number"):
        make_dataset({big: "1", mid: 1.0}, 10)
    same = _batches({big: np.float32(1.0), mid: np.int64(3)}, 256, seed=2)
    assert [b.tolist() for b in same] == [b.tolist() for b in _batches({mid: 3.0, big: 1}, 256,
                                                                         seed=2)]  # fmt: skip
    huge = _batches({big: 1e308, mid: 3e307}, 256, seed=2)
    assert len(np.concatenate(huge)) == 6000 + 1800
    with pytest.raises(ValueError, match=r"datasets with weights are mixed in the epoch order"):
        make_dataset({big: 1.0, mid: 1.0}, 10, shuffle=False)
    assert steps_per_epoch({big: 1.0, mid: 3.0}, 100) == -(-(6000 + 1800) // 100)


def _read_steps(path, position: ReadPosition, steps: int | None = None, **options):
    """Reads on from `position` (one pipeline, global batch 256), moving it on each step."""
    ds = make_dataset(path, 256, features=["id"], label_key="", seed=3, position=position,
                      **options)  # fmt: skip
    found = []
    for batch in ds.take(steps) if steps else ds:
        found.append(sorted(batch["id"].numpy().tolist()))
        position.advance()
    return found


def test_weights_changed_at_a_step_go_on_with_the_epoch_each_source_where_it_stood(sources):
    names = [sources[n] for n in SIZES]
    before = dict(zip(names, (0.2, 0.3, 0.5), strict=True))
    after = dict(zip(names, (0.6, 0.0, 0.4), strict=True))
    steps = steps_per_epoch(before, 256)
    position = ReadPosition()
    first = _read_steps(before, position, 12)
    assert position.as_dict()["weights"]["segments"] == [[0, [0.2, 0.3, 0.5]]]
    saved = position.as_dict()
    rest = _read_steps(after, position)
    assert position.as_dict() == {
        "epoch": 1, "step": 0,
        "weights": {"epoch": 1, "sources": [f"{p}/manifest.json" for p in names],
                    "segments": [[0, [0.6, 0.0, 0.4]]]},
    }  # fmt: skip
    assert first == _read_steps(before, ReadPosition(), 12)  # the steps before: unchanged
    assert len(first) + len(rest) == steps
    ids = np.array([i for step in first + rest for i in step])
    assert len(ids) == TOTAL
    own = [ids[_source(ids) == k] for k in range(len(SIZES))]
    # The rest of the epoch (records 12 x 256 on) shared by the new weights.
    later = np.array([i for step in rest for i in step])
    expected = np.array([0.6, 0.0, 0.4]) * (TOTAL - 12 * 256)
    got = [int((_source(later) == k).sum()) for k in range(len(SIZES))]
    assert np.all(np.abs(np.array(got) - expected) <= 8 * 3), got  # streams' roundings
    assert got[1] == 0
    big = own[0]  # 6,000 records, read about 2,600 times: none twice
    assert len(big) < SIZES["big"] and len(set(big.tolist())) == len(big)
    # Resumed after the change, on 4 pipelines, from a saved position: the same steps.
    resumed = ReadPosition.from_dict(saved)
    assert _read_steps(after, resumed, 5) == rest[:5]
    moved = ReadPosition.from_dict(resumed.as_dict())
    four = _steps(after, 256, 4, seed=3, position=moved)
    assert four == rest[5:]


def test_a_position_refuses_other_datasets_within_an_epoch(sources):
    position = ReadPosition()
    _read_steps({sources["big"]: 1.0, sources["mid"]: 1.0}, position, 3)
    with pytest.raises(ValueError, match=r"the position is at step 3 of epoch 0, read from other"):
        make_dataset({sources["big"]: 1.0, sources["small"]: 1.0}, 256, position=position)
    position.step.assign(0)  # the next epoch's start: any datasets
    make_dataset({sources["big"]: 1.0, sources["small"]: 1.0}, 256, position=position)


def test_a_position_restored_after_the_dataset_was_made_counts_its_weights(sources, tmp_path):
    names = [sources[n] for n in SIZES]
    before = dict(zip(names, (0.2, 0.3, 0.5), strict=True))
    after = dict(zip(reversed(names), (0.4, 0.0, 0.6), strict=True))  # keys in another order
    position = ReadPosition()
    _read_steps(before, position, 12)
    saved = tf.train.Checkpoint(position=position).save(str(tmp_path / "ckpt"))
    restored_first = ReadPosition()
    tf.train.Checkpoint(position=restored_first).restore(saved)
    expected = _read_steps(after, restored_first)
    made_first = ReadPosition()
    ds = make_dataset(after, 256, features=["id"], label_key="", seed=3, position=made_first)
    tf.train.Checkpoint(position=made_first).restore(saved)  # after the dataset was made
    got = [sorted(b["id"].numpy().tolist()) for b in ds]
    assert got == expected
    assert made_first.as_dict()["weights"]["segments"] == [[0, [0.2, 0.3, 0.5]],
                                                           [12, [0.6, 0.0, 0.4]]]  # fmt: skip


def test_one_dataset_and_several_do_not_share_an_epoch(sources, tmp_path):
    position = ReadPosition()
    _read_steps(sources["big"], position, 3)
    with pytest.raises(ValueError, match=r"the position is at step 3 of epoch 0, read from other"):
        make_dataset({sources["big"]: 1.0, sources["mid"]: 1.0}, 256, position=position)
    saved = tf.train.Checkpoint(position=position).save(str(tmp_path / "one"))
    later = ReadPosition()
    ds = make_dataset([sources["big"], sources["mid"]], 256, position=later)
    tf.train.Checkpoint(position=later).restore(saved)
    with pytest.raises(tf.errors.OpError, match=r"read from other datasets"):
        next(iter(ds))
    kept = ReadPosition.from_dict(position.as_dict())  # a state kept as a dict: the same
    assert position.as_dict()["weights"]["sources"] == [f"{sources['big']}/manifest.json"]
    with pytest.raises(ValueError, match=r"the position is at step 3 of epoch 0, read from other"):
        make_dataset([sources["big"], sources["mid"]], 256, position=kept)
