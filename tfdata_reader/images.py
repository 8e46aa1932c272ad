"""Decoding a batch of encoded images (the `image` feature of a `--format images` dataset)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

__all__ = ["image_decoder"]


def image_decoder(size: tuple[int, int] | None, channels: int) -> Callable[..., Any]:
    """Decodes a batch of encoded images: ragged at their own sizes, or dense at `size`."""

    def decode_one(encoded: tf.Tensor) -> tf.Tensor:
        image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
        if size is None:
            return tf.RaggedTensor.from_tensor(image, ragged_rank=1)
        resized = tf.image.resize(image, size, method="bilinear")
        return tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8)

    if size is None:
        signature = tf.RaggedTensorSpec([None, None, channels], tf.uint8, ragged_rank=1)
    else:
        signature = tf.TensorSpec([*size, channels], tf.uint8)

    def decode(images: tf.Tensor) -> tf.Tensor:
        return tf.map_fn(decode_one, images, fn_output_signature=signature)

    return decode
