"""The elements of a user's PCollection (dicts, record batches or serialized Examples) as
feature specs, conformed Arrow batches and serialized Examples, for `WriteShards`."""

from __future__ import annotations

import collections
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import pyarrow as pa

from beam_jobs.codec.examples import ExampleEncoder, decode_examples
from beam_jobs.core.bad_rows import BadRow, as_text
from beam_jobs.core.errors import DataError
from beam_jobs.schema.conform import conform, flatten_structs, infer_from_table, one_layout
from beam_jobs.schema.precision import Float32Changes
from beam_jobs.schema.rows import flatten_object, infer_from_rows
from beam_jobs.sink.counters import counter
from beam_jobs.stats.batches import finish_all, new_stats, update_all
from tfdata_reader.manifest import FeatureSpec

__all__ = ["EncodeElementsFn", "infer_spec"]

_SOURCE = "<pcollection>"


def _to_table(elements: Sequence[Any]) -> pa.Table:
    """A batch of dicts or record batches as one flattened table."""
    first = elements[0]
    kind = pa.RecordBatch if isinstance(first, pa.RecordBatch) else dict
    other = next((e for e in elements if not isinstance(e, kind)), first)
    if not isinstance(other, kind):
        # pyarrow would read a string or a list among dicts as a row of its own making.
        raise TypeError(
            "WriteShards takes dicts, pyarrow.RecordBatch or serialized tf.train.Example bytes, "
            f"one kind per PCollection; got {type(other).__name__} {_shown(other)}"
        )
    if kind is pa.RecordBatch:
        table = pa.Table.from_batches(list(elements))
    else:
        # Every key any element has (pyarrow's from_pylist takes the first element's keys and
        # silently leaves out the others'), in the order they first appear.
        names = list(dict.fromkeys(key for element in elements for key in element))
        table = pa.Table.from_pydict({name: [e.get(name) for e in elements] for name in names})
    return flatten_structs(table)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# What a batch that does not make one table raises (a value of another type, an integer
# beyond int64, an element that is no dict): its elements are then looked at one by one.
_UNREADABLE = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError)


def infer_spec(sample: Sequence[Any]) -> list[FeatureSpec]:
    """The feature spec of sampled elements (dicts, record batches or serialized Examples).

    Raises:
      DataError: when the sample is empty or its values cannot be Example features.
    """
    if not sample:
        raise DataError("WriteShards got an empty PCollection and no features to describe it")
    # The kind most elements are (the others become dead letters when encoded).
    kinds = collections.Counter(
        next((k for k in (bytes, dict, pa.RecordBatch) if isinstance(e, k)), None) for e in sample
    )
    kind = max((k for k in kinds if k is not None), key=kinds.__getitem__, default=None)
    if kind is None:
        raise DataError(
            "WriteShards takes dicts, pyarrow.RecordBatch or serialized tf.train.Example bytes; "
            f"the sampled elements are {sorted({type(e).__name__ for e in sample})}"
        )
    sample = [e for e in sample if isinstance(e, kind)]
    if kind is bytes:
        return infer_from_table(pa.Table.from_batches([decode_examples(sample)]), scalar_lists=True)
    if kind is dict:
        # Like JSON lines: a key with values of several types takes the type most rows have.
        return infer_from_rows([flatten_object(row) for row in sample], "WriteShards sample")
    try:
        return infer_from_table(_to_table(sample))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise DataError(f"WriteShards: cannot infer a feature spec from the sample: {e}") from e


def _count_ignored(
    table: pa.Table | pa.RecordBatch,
    features: Sequence[FeatureSpec],
    ignored: collections.Counter[str],
) -> None:
    """Counts, by key, the values of keys the spec does not have (never dropped unsaid)."""
    known = {f.name for f in features}
    for name in table.schema.names:
        if name not in known:
            column = table.column(name)
            present = len(column) - column.null_count
            if present:
                ignored[name] += present


def _beyond_int64(element: Any) -> str:
    """The reason for an element holding an integer past int64, naming it as `convert` does."""
    if isinstance(element, dict):
        for key, value in flatten_object(element).items():
            for number in value if isinstance(value, list) else [value]:
                if isinstance(number, int) and not -(2**63) <= number < 2**63:
                    return f"feature {key!r}: the integer {number} is beyond the int64 range"
    return "an integer beyond the int64 range (-2**63 to 2**63-1)"


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    return {k: as_text(v) if isinstance(v, bytes) else v for k, v in row.items()}


def _flat(element: Any) -> dict[str, Any]:
    if isinstance(element, dict):
        return element
    if isinstance(element, pa.RecordBatch):
        return {"batch_rows": element.num_rows}
    return {"element": _shown(element)}


class EncodeElementsFn(beam.DoFn):
    """Batches of elements -> serialized Examples; aside: bad rows, and per batch a tally (the
    elements received, for the count check at publishing, the missing values per feature and
    the features' statistics)."""

    BAD = "bad"
    TALLY = "tally"

    def __init__(self, features: Sequence[FeatureSpec] | None) -> None:
        self._fixed = tuple(features) if features else None
        self._features: tuple[FeatureSpec, ...] = ()
        self._bad_counter = counter("records_dead_lettered")

    @staticmethod
    def _conform(
        elements: list[Any],
        features: Sequence[FeatureSpec],
        changes: Float32Changes,
        ignored: collections.Counter[str],
    ) -> tuple[pa.RecordBatch, dict[int, str]]:
        """Conformed good rows and {index: reason}; one element at a time only when the batch
        does not even make one table (a value of another type than the rest). Counted as
        `convert` counts them: what float32 changes (`changes`), and by key the
        values of keys the spec does not have (`ignored`: a key the sample never showed)."""
        try:
            table = _to_table(elements)
        except _UNREADABLE:
            pass
        else:
            _count_ignored(table, features, ignored)
            return conform(table, features, changes)
        good, bad = [], {}
        for index, element in enumerate(elements):
            try:
                table = _to_table([element])
                batch, problems = conform(table, features, changes)
                if not problems:
                    _count_ignored(table, features, ignored)
            except OverflowError:
                problems = {0: _beyond_int64(element)}
            except _UNREADABLE as e:
                problems = {0: str(e)}
            if problems:
                bad[index] = problems[0]
            else:
                good.append(batch)
        if not good:  # no columns and no rows: conform makes every feature an empty column
            return conform(pa.table({}), features)[0], bad
        return pa.Table.from_batches(one_layout(good)).combine_chunks().to_batches()[0], bad

    def process(self, elements: list[Any], spec: list[FeatureSpec] | None = None) -> Iterator[Any]:
        features = self._fixed or tuple(spec or ())
        if features != self._features:
            self._features, self._encoder = features, ExampleEncoder(features)
        changes = Float32Changes()
        ignored: collections.Counter[str] = collections.Counter()
        if isinstance(elements[0], bytes):
            # Encoded again, not passed through: every record then holds the spec's features,
            # in its order, and nothing else.
            decoded = decode_examples(elements)
            _count_ignored(decoded, features, ignored)
            batch, bad = conform(decoded, features, changes)
            rows = [{"raw": as_text(elements[i])} for i in sorted(bad)]
        else:
            batch, bad = self._conform(elements, features, changes, ignored)
            rows = [{"cells": _cells(_flat(elements[i]))} for i in sorted(bad)]
        columns = self._encoder.columns(batch)
        records = self._encoder.encode_columns(columns, batch.num_rows)
        for (index, reason), content in zip(sorted(bad.items()), rows, strict=True):
            yield beam.pvalue.TaggedOutput(
                self.BAD, BadRow(_SOURCE, 0, 0, reason, index, content).to_json()
            )
        self._bad_counter.inc(len(bad))
        stats = new_stats(features)
        update_all(stats, features, columns, batch)
        missing = {name: feature.missing for name, feature in stats.items()}
        received = sum(e.num_rows if isinstance(e, pa.RecordBatch) else 1 for e in elements)
        tally = {
            "elements": received,
            "missing": missing,
            "stats": finish_all(stats),
            "rounded": dict(changes.rounded),
            "zeroed": dict(changes.zeroed),
            "ignored": dict(ignored),
        }
        yield beam.pvalue.TaggedOutput(self.TALLY, tally)
        yield from records
