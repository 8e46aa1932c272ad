"""`--format tfrecord`: re-shard TFRecord files of `tf.train.Example`s into sized shards.

Uncompressed files may be cut anywhere: a piece finds its first record by the framing's
checksums, verified by the records that follow (`find_record_start`), and owns the records
that start inside it. Each piece reports the bytes its records cover, and publishing checks
that a file's pieces cover it end to end: a wrong resync or a skipped corrupt stretch is an
error, never lost records. GZIP files (by
suffix or by their magic bytes, since TFRecord files often have no suffix) are read whole.
Records are decoded with tfx-bsl in batches, conformed to the spec and encoded again; a record
that is not an Example goes to the dead letter; a record whose framing is corrupt is a data error.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
from collections.abc import Callable, Generator, Iterator, Sequence

import pyarrow as pa

from beam_jobs.codec.examples import decode_examples
from beam_jobs.codec.framing import RECORD_OVERHEAD_BYTES, find_record_start, read_records
from beam_jobs.core.bad_rows import BadRow, as_text
from beam_jobs.core.errors import DataError, FramingError
from beam_jobs.core.inputs import Covered, InputFile, Piece
from beam_jobs.formats.base import InputFormat, OnBadRow, PieceReport, ReadSettings, Sample
from beam_jobs.formats.compressed import Codec, compression_of, open_input, read_head
from beam_jobs.formats.lines.cut_counts import CutCounts
from beam_jobs.schema.conform import conform, infer_from_table, merge_features
from tfdata_reader.manifest import FeatureSpec

__all__ = ["TFRecordFormat"]

_BATCH_RECORDS = 8192
_GZIP_MAGIC = b"\x1f\x8b"
_PROBE_THREADS = 16


def _magic(path: str) -> bytes:
    with open_input(path) as f:
        return f.read(2)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A protobuf varint at `at`: (value, the offset after it); raises IndexError when cut."""
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7


def _top_level_fields(record: bytes) -> set[int] | None:
    """The field numbers at the top level of a serialized proto (None: not a proto at all)."""
    fields, at = set(), 0
    try:
        while at < len(record):
            key, at = _varint(record, at)
            number, wire = key >> 3, key & 7
            fields.add(number)
            if wire == 0:
                _, at = _varint(record, at)
            elif wire == 1:
                at += 8
            elif wire == 2:
                length, at = _varint(record, at)
                at += length
            elif wire == 5:
                at += 4
            else:
                return None
    except IndexError:
        return None
    return fields if at == len(record) else None


def _not_an_example(record: bytes) -> str | None:
    """Why a record is not a plain `tf.train.Example` (which has only field 1, `features`);
    None when it is. Most records are one field-1 message exactly, told in a few steps."""
    if record[:1] == b"\n":
        try:
            length, at = _varint(record, 1)
        except IndexError:
            length, at = -1, 0
        if at + length == len(record):
            return None
    fields = _top_level_fields(record)
    if fields is None:
        return "not a tf.train.Example: not a serialized protocol buffer"
    if fields - {1}:
        return f"not a tf.train.Example: it has field(s) {sorted(fields - {1})}"
    return None


def _refuse_sequence_examples(records: Sequence[bytes], offsets: Sequence[int], path: str) -> None:
    """A file of SequenceExamples would lose every `feature_lists` (field 2) if read as
    Examples: refused whole, naming the first such record."""
    for record, offset in zip(records, offsets, strict=True):
        if record[:1] != b"\n" or _not_an_example(record):
            fields = _top_level_fields(record) or set()
            if fields == {1, 2} or fields == {2}:
                raise DataError(
                    f"{path}: the record at byte {offset} is a tf.train.SequenceExample (it has "
                    "feature_lists); reading it as a tf.train.Example would drop them, so it is "
                    "refused: tfrecord-etl converts tf.train.Example records only"
                )


def _decode_each(
    records: list[bytes], on_bad: Callable[[int, str], None]
) -> list[tuple[list[int], pa.RecordBatch]]:
    """Decoded batches with the record indexes they hold; records that are not Examples go
    to `on_bad` (found one by one, only when the batch fails)."""
    try:
        return [(list(range(len(records))), decode_examples(records))]
    except Exception:  # tfx-bsl raises RuntimeError(DATA_LOSS) or ValueError
        decoded = []
        for index, record in enumerate(records):
            try:
                decoded.append(([index], decode_examples([record])))
            except Exception as e:
                on_bad(index, f"not a tf.train.Example: {e}")
        return decoded


def _complete_records(data: bytes) -> tuple[list[bytes], int]:
    """The whole records at the start of `data`, and the bytes they take."""
    records, used = [], 0
    try:
        for offset, record in read_records(io.BytesIO(data)):
            records.append(record)
            used = offset + len(record) + RECORD_OVERHEAD_BYTES
    except FramingError:
        pass  # the head ends inside a record
    return records, used


@dataclasses.dataclass(frozen=True)
class TFRecordFormat(InputFormat):
    """`gzip`: the inputs that are GZIP without a .gz suffix (found by their magic bytes)."""

    name = "tfrecord"
    extensions = (".tfrecord", ".tfrecords", ".tfr")

    gzip: frozenset[str] = frozenset()

    @classmethod
    def prepare(cls, files: Sequence[InputFile], settings: ReadSettings) -> TFRecordFormat:
        # Two bytes per file tell GZIP apart; read in parallel, as there may be many on GCS.
        unknown = [f.path for f in files if compression_of(f.path) is None and f.size]
        with concurrent.futures.ThreadPoolExecutor(_PROBE_THREADS) as pool:
            magics = list(pool.map(_magic, unknown))
        gzip = frozenset(p for p, m in zip(unknown, magics, strict=True) if m == _GZIP_MAGIC)
        return cls(settings.kept, settings.max_record_bytes, gzip)

    def _compression(self, path: str) -> Codec | None:
        return compression_of(path) or (Codec.GZIP if path in self.gzip else None)

    def with_cuts(self, files: Sequence[InputFile], target_shard_bytes: int) -> list[InputFile]:
        return [
            dataclasses.replace(f, cuts=() if self._compression(f.path) else None) for f in files
        ]

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        head = read_head(f, sample_bytes, self._compression(f.path))
        records, used = _complete_records(head.content)
        if head.content and not records:
            raise DataError(
                f"{f.path}: no complete TFRecord record in the first {len(head.content)} bytes; "
                "is it "
                "a TFRecord file (and all of the record within --sample_bytes)?"
            )
        good = [table for _, table in _decode_each(records, lambda index, reason: None)]
        table = pa.Table.from_batches(good).combine_chunks() if good else pa.table({})
        return Sample(f.path, table, used * head.stored_per_byte, data=records)

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        per_sample = [infer_from_table(s.table, scalar_lists=True) for s in samples]
        return merge_features(per_sample, overrides)

    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        yield from self._convert(sample.data, [0] * len(sample.data), sample.path, features, None)

    def _convert(
        self,
        records: list[bytes],
        offsets: list[int],
        path: str,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None,
    ) -> Iterator[pa.RecordBatch]:
        def report(record: bytes, start: int, reason: str) -> None:
            if on_bad_row is not None:
                end = start + len(record) + RECORD_OVERHEAD_BYTES
                raw = {"raw": as_text(record)}
                on_bad_row(BadRow(path, start, end, reason, None, raw, offset=start))

        _refuse_sequence_examples(records, offsets, path)
        # Records with fields an Example does not have would decode with them dropped.
        problems = {i: why for i, r in enumerate(records) if (why := _not_an_example(r))}
        for index, reason in problems.items():
            report(records[index], offsets[index], reason)
        if problems:
            keep = [i for i in range(len(records)) if i not in problems]
            records, offsets = [records[i] for i in keep], [offsets[i] for i in keep]
        if not records:
            return

        def bad(index: int, reason: str) -> None:
            report(records[index], offsets[index], reason)

        for indexes, table in _decode_each(records, bad):
            batch, conflicts = conform(table, features)
            for index, reason in sorted(conflicts.items()):
                bad(indexes[index], reason)
            if batch.num_rows:
                yield batch

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        cut_counts: CutCounts | None = None,
    ) -> Generator[pa.RecordBatch, None, PieceReport]:
        compression = self._compression(piece.path)
        records: list[bytes] = []
        offsets: list[int] = []
        covered: Covered | None = None
        try:
            with open_input(piece.path, compression) as f:
                start = 0
                if compression is None and piece.start > 0:
                    found = find_record_start(f, piece.start, piece.file_size)
                    if found is None or found >= piece.end:
                        return PieceReport()
                    start = found
                    f.seek(start)
                end = piece.end if compression is None else None
                reached = start
                for offset, record in read_records(f, start, stop=end):
                    records.append(record)
                    offsets.append(offset)
                    reached = offset + len(record) + RECORD_OVERHEAD_BYTES
                    if len(records) == _BATCH_RECORDS:
                        yield from self._convert(records, offsets, piece.path, features, on_bad_row)
                        records, offsets = [], []
                if compression is None:
                    covered = Covered(piece.path, start, reached, piece.file_size)
        except FramingError as e:
            raise DataError(f"{piece.path}: corrupt TFRecord file: {e}") from e
        if records:
            yield from self._convert(records, offsets, piece.path, features, on_bad_row)
        return PieceReport(covered=covered)
