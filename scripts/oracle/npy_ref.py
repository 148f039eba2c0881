"""The bytes b2fs shows in `array.npy` and `table.npy` for an array: what `numpy.save` writes
with its data alignment (`numpy.lib.format.ARRAY_ALIGN`, 64) raised to a page, 4096 bytes, so
that the data part starts on a page boundary. numpy itself writes them here: the header is its
own, only padded further with spaces."""

import numpy as np

PAGE = 4096


def _format_module():
    try:
        import numpy.lib._format_impl as f  # numpy 2: where np.save reads ARRAY_ALIGN
    except ImportError:
        import numpy.lib.format as f  # numpy 1
    return f


def save(file, arr):
    """`np.save(file, arr)` with the data part aligned to a page."""
    f = _format_module()
    old = f.ARRAY_ALIGN
    f.ARRAY_ALIGN = PAGE
    try:
        np.save(file, arr)
    finally:
        f.ARRAY_ALIGN = old
