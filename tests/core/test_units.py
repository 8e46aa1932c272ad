import pytest

from beam_jobs.core.units import format_size, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4096", 4096),
        ("1KB", 1000),
        ("1KiB", 1024),
        ("100MB", 100_000_000),
        ("256MiB", 268_435_456),
        ("1GiB", 1_073_741_824),
        ("1.5GiB", 1_610_612_736),
        (" 2 gb ", 2_000_000_000),
        ("64k", 64_000),
        (512, 512),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MB", "12XB", "-5MB", "1,5MB", "ten"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="cannot read .* as a size; use a number of bytes"):
        parse_size(text)


@pytest.mark.parametrize(
    "num_bytes, expected",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (268_435_456, "256 MiB"),
        (5 * 1024**4, "5 TiB"),
        (1010 * 1024, "1010 KiB"),  # not 1.01e+03 KiB
        (1023 * 1024**2, "1023 MiB"),
        (999.4 * 1024, "999 KiB"),
        (3000 * 1024**4, "3000 TiB"),
    ],
)
def test_format_size(num_bytes, expected):
    assert format_size(num_bytes) == expected
