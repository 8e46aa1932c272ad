"""ReadOptions: validated once, with messages that name the option and the value."""

from __future__ import annotations

import dataclasses

import pytest

from tfdata_reader.options import ReadOptions


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_epochs": 0}, "num_epochs must be at least 1 or None"),
        ({"block_length": 0}, "block_length must be at least 1, got 0"),
        ({"shuffle_window": 0}, "shuffle_window must be at least 1, got 0"),
        ({"cycle_length": 0}, "cycle_length must be at least 1 or None, got 0"),
        ({"num_parallel_calls": 0}, "num_parallel_calls must be at least 1 or AUTOTUNE, got 0"),
        ({"image_size": (8, 8)}, "image_size needs decode_images=True"),
        ({"decode_images": True, "image_size": (0, 8)}, r"image_size must be \(height, width\)"),
        ({"image_channels": 2}, r"image_channels must be one of \(1, 3, 4\), got 2"),
        ({"features": "id"}, "features must be a list of names, got the string 'id'"),
    ],
)
def test_bad_options_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ReadOptions(**kwargs)


def test_options_are_frozen_and_normalized():
    options = ReadOptions(features=["a", "b"], label_key="y", decode_images=True, image_size=[4, 5])
    assert options.features == ("a", "b") and options.image_size == (4, 5)
    assert options.parsed_features() == ("a", "b", "y")
    assert ReadOptions(label_key="y").parsed_features() is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 3


@pytest.mark.parametrize(
    "shuffle, seed, deterministic, expected",
    [
        (True, None, None, False),
        (True, 1, None, None),
        (False, None, None, None),
        (True, None, True, True),
    ],
)
def test_element_order(shuffle, seed, deterministic, expected):
    options = ReadOptions(shuffle=shuffle, seed=seed, deterministic=deterministic)
    assert options.element_order_deterministic is expected
