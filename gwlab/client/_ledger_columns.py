"""Ledger rows kept as typed columns: ~100 bytes a call instead of ~340 as one object per call.

A batch of a million decisions records a million calls; as frozen dataclasses they held 34 MB per
100k calls, which was all of a long run's memory growth. Here numbers live in `array` columns (None as
a sentinel), repeated strings (method, path, family, model, error, run) as codes into a table of
distinct values, and request ids end to end in one bytearray. numpy and pandas are imported inside
`column()`: the client layer loads them only when a frame is asked for.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

_NONE = -(2**63)  # the missing integer: no count, status or token total can be this
_BOOL_NONE = -1


class _Floats:
    def __init__(self) -> None:
        self.values = array("d")

    def append(self, value: float) -> None:
        self.values.append(value)

    def get(self, i: int) -> float:
        return self.values[i]

    def column(self) -> np.ndarray:
        import numpy as np
        return np.array(self.values, dtype=np.float64)


class _Ints:
    """Optional integers (outside int64 counts as missing: a server's nonsense is not worth a crash)."""

    def __init__(self) -> None:
        self.values = array("q")

    def append(self, value: int | None) -> None:
        self.values.append(int(value) if isinstance(value, int) and _NONE < value < 2**63 else _NONE)

    def get(self, i: int) -> int | None:
        value = self.values[i]
        return None if value == _NONE else value

    def column(self) -> Any:
        import numpy as np
        import pandas as pd

        values = np.array(self.values, dtype=np.int64)
        missing = values == _NONE
        return pd.arrays.IntegerArray(np.where(missing, 0, values), missing)


class _Bools:
    def __init__(self) -> None:
        self.values = array("b")

    def append(self, value: bool | None) -> None:
        self.values.append(_BOOL_NONE if value is None else int(bool(value)))

    def get(self, i: int) -> bool | None:
        value = self.values[i]
        return None if value == _BOOL_NONE else bool(value)

    def column(self) -> Any:
        import numpy as np
        import pandas as pd

        values = np.array(self.values, dtype=np.int8)
        return pd.arrays.BooleanArray(values == 1, values == _BOOL_NONE)


class _Labels:
    """Strings from a small set: a code per row (0 is None) and the table of distinct values."""

    def __init__(self) -> None:
        self.codes = array("I")
        self.table: list[str | None] = [None]
        self.index: dict[str, int] = {}

    def append(self, value: str | None) -> None:
        if value is None:
            self.codes.append(0)
            return
        code = self.index.get(value)
        if code is None:
            code = self.index[value] = len(self.table)
            self.table.append(value)
        self.codes.append(code)

    def get(self, i: int) -> str | None:
        return self.table[self.codes[i]]

    def column(self) -> np.ndarray:
        import numpy as np
        return np.array(self.table, dtype=object)[np.array(self.codes, dtype=np.intp)]


class _Texts:
    """Distinct strings (request ids): UTF-8 end to end in one buffer, with where each row's text ends."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends = array("q")
        self.missing: set[int] = set()  # rows holding None (rare: a call that failed before any answer)

    def append(self, value: str | None) -> None:
        if value is None:
            self.missing.add(len(self.ends))
        else:
            self.data += value.encode()
        self.ends.append(len(self.data))

    def get(self, i: int) -> str | None:
        if i in self.missing:
            return None
        return self.data[self.ends[i - 1] if i else 0:self.ends[i]].decode()

    def column(self) -> np.ndarray:
        import numpy as np
        return np.array([self.get(i) for i in range(len(self.ends))], dtype=object)


_KINDS: dict[str, Callable[[], Any]] = {"float": _Floats, "int": _Ints, "bool": _Bools, "label": _Labels,
                                        "text": _Texts}


class Columns:
    """Rows of one record type stored column by column; `row(i)` rebuilds the record."""

    def __init__(self, make: Callable[..., Any], kinds: Sequence[tuple[str, str]]) -> None:
        self._make = make
        self._names = [name for name, _ in kinds]
        self._columns = [_KINDS[kind]() for _, kind in kinds]
        self._length = 0

    def append(self, values: Sequence[Any]) -> None:
        for column, value in zip(self._columns, values, strict=True):
            column.append(value)
        self._length += 1

    def __len__(self) -> int:
        return self._length

    def row(self, i: int) -> Any:
        return self._make(*(column.get(i) for column in self._columns))

    def rows(self) -> list[Any]:
        return [self.row(i) for i in range(self._length)]

    def to_dict(self) -> dict[str, Any]:
        """Each column as an array pandas takes as is (nullable Int64 and boolean where values may be missing)."""
        return {name: column.column() for name, column in zip(self._names, self._columns, strict=True)}
