"""Every answer of a `repeats=k` run, how much the repeats agree, and the repeats reduced to one per row.

`repeats=k` asks each row k times; repeat r > 0 has its own checkpoint key (`checkpoint.key_of`), so a
resumed run reads every repeat back and sends none of them again. The run's result keeps one row per
input row (mean probabilities, `__std`, `__repeats`) and adds `{q}__agreement`: the share of the row's
answered repeats that gave its most common answer (a yes/no answer read at 0.5, a text answer up to case
and spacing, a JSON text by its content), NaN below two answered repeats. `BatchFrame.repeats_frame()` is the long form,
one row per (row, repeat) with that repeat's own answers; `stability` sums agreement up per question,
and `reduce_repeats` turns the long form back into one row per row, as `evaluate` and `compare` do with
``reduce=``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy

__all__ = ["REDUCERS", "REPEAT", "agreement", "decisions", "prepare", "reduce_repeats", "stability"]

REPEAT = "repeat"  # the long frame's index level that numbers a row's repeats
REDUCERS = ("majority", "mean")


def stem(column: str) -> str:
    """The question id of a decided column (`urgent__noul` -> `urgent`); a text column is its own."""
    return column.rsplit(tidy.SEP, 1)[0]


def decisions(column: str, values: np.ndarray) -> np.ndarray:
    """Each answer as the decision it makes, for counting agreement: yes/no at the cut, text folded."""
    if tidy.question_of(column, tidy.NOUL) is not None:
        return np.where(np.isnan(values), np.nan, values >= tidy.CUT)
    if values.dtype == object:
        return np.array([_folded(v) for v in values.ravel()], dtype=object).reshape(values.shape)
    return values


def _folded(value: object) -> object:
    """A text answer as compared across repeats: up to case and spacing, and a JSON answer (a schema-
    constrained choice) by its content, so `{"team": "x"}` and `{ "team":"x" }` agree."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text[:1] in ("{", "["):
        try:
            return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":")).casefold()
        except ValueError:
            pass
    return " ".join(text.split()).casefold()


def agreement(column: str, values: np.ndarray, done: np.ndarray) -> np.ndarray:
    """Per job: the share of its answered repeats (`values`, `done`: repeats x jobs) that gave its most
    common decision; NaN where fewer than two repeats were answered (nothing to agree with)."""
    decided = decisions(column, values)
    flat, _ = pd.factorize(decided.ravel(), use_na_sentinel=True)
    codes = np.where(done.ravel(), flat, -1).reshape(values.shape)
    same = (codes[:, None, :] == codes[None, :, :]) & (codes[None, :, :] >= 0)  # k x k x jobs; k is small
    modal = same.sum(axis=1).max(axis=0)
    answered = (codes >= 0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(answered >= 2, modal / answered, np.nan)


def stability(frame: pd.DataFrame, *, text: str = "folded", words: int | None = None) -> pd.DataFrame:
    """Per question of a `repeats=k` result: how often its answer moved between repeats.

    Columns: `rows` (rows with two or more answered repeats), `changed` (share of them whose decision
    was not the same in every repeat), `agreement` (mean of `{q}__agreement`), `p_std` and `p_std_max`
    (mean and largest spread of its probabilities over rows, from the `__std` columns; NaN for text).
    A deterministic model shows changed 0 and p_std 0.

    Text answers are compared as the run recorded them (`text="folded"`: up to case and spacing) or,
    with `text="words"`, by their words alone (punctuation ignored: "No, this" and "No. This" agree),
    and with `words=N` by their first N words only (answers cut at `max_tokens` differ in their tails).
    Both re-read the result's `repeats_frame()`.
    """
    if text not in ("folded", "words"):
        raise InvalidRequest("text", f"'folded' or 'words'; got {text!r}")
    if words is not None and not (isinstance(words, int) and not isinstance(words, bool) and words >= 1):
        raise InvalidRequest("words", f"a positive number of words or None; got {words!r}")
    marks = [str(c) for c in frame.columns if tidy.question_of(str(c), tidy.AGREEMENT) is not None]
    if not marks:
        raise InvalidRequest("frame", "no {q}__agreement column: stability reads a result of a run with repeats > 1")
    repeats_frame = getattr(frame, "repeats_frame", None)  # a run's result has it (RunFrame), a plain frame not
    again = (text != "folded" or words is not None) and repeats_frame is not None
    long = repeats_frame() if again and repeats_frame is not None else None
    rows = []
    for mark in marks:
        q = tidy.question_of(mark, tidy.AGREEMENT)
        assert q is not None  # marks are the columns that name one
        share = pd.to_numeric(frame[mark], errors="coerce").dropna()
        if long is not None and q in long.columns and long[q].dtype == object:
            share = _text_agreement(long, q, text, words)
        spread = frame[[c for c in map(str, frame.columns) if tidy.question_of(c, tidy.STD) and _of(c, q)]]
        std = spread.to_numpy(float) if spread.shape[1] else np.full((len(frame), 1), np.nan)
        rows.append({"question": q, "rows": len(share), "changed": float((share < 1).mean()) if len(share) else np.nan,
                     "agreement": float(share.mean()) if len(share) else np.nan,
                     "p_std": float(np.nanmean(std)) if np.isfinite(std).any() else np.nan,
                     "p_std_max": float(np.nanmax(std)) if np.isfinite(std).any() else np.nan})
    return pd.DataFrame(rows).set_index("question")


def _text_agreement(long: pd.DataFrame, column: str, text: str, words: int | None) -> pd.Series:
    """Per row with two or more answered repeats: the share that gave its most common normalised text."""
    def normal(value: object) -> object:
        if not isinstance(value, str):
            return None
        kept = re.findall(r"\w+", value.casefold()) if text == "words" else value.casefold().split()
        return " ".join(kept[:words] if words is not None else kept)

    index = long.index
    assert isinstance(index, pd.MultiIndex)  # (row, repeat): a repeats frame's
    rows = pd.factorize(index.droplevel(REPEAT))[0]
    said = pd.DataFrame({"row": rows, "text": long[column].map(normal).to_numpy()}).dropna()
    counts = said.groupby(["row", "text"]).size()
    modal, answered = counts.groupby(level="row").max(), counts.groupby(level="row").sum()
    return (modal / answered)[answered >= 2]


def deterministic(spec: Mapping[str, Any] | None) -> str | None:
    """Why a run's requests ask for a deterministic answer (temperature 0, top_k 1, no sampling), or None:
    repeating them then sends and pays k times for one answer."""
    params = {**(spec or {}), **((spec or {}).get("params") or {})}
    if params.get("temperature") == 0:
        return "temperature=0"
    if params.get("top_k") == 1:
        return "top_k=1"
    if params.get("do_sample") is False:
        return "do_sample=False"
    return None


def _of(column: str, q: str) -> bool:
    """A probability spread of question `q`: `{q}__noul__std` or `{q}__p__{option}__std`."""
    return column == tidy.column(tidy.column(q, tidy.NOUL), tidy.STD) or column.startswith(tidy.probability_prefix(q))


def prepare(frame: pd.DataFrame, reduce: str | None) -> tuple[pd.DataFrame, np.ndarray | None]:
    """A frame to score and its rows' clusters: a repeats frame reduced (`reduce`), or pooled with
    each (row, repeat) a row clustered by row; any other frame as it is (no clusters)."""
    if REPEAT not in (frame.index.names or []):
        if reduce is not None:
            raise InvalidRequest("reduce", f"only for a repeats frame (index level {REPEAT!r}, from a result's "
                                           "repeats_frame()); this frame has one answer per row")
        return frame, None
    if reduce is not None:
        return reduce_repeats(frame, reduce), None
    index = frame.index
    assert isinstance(index, pd.MultiIndex)  # (row, repeat): a repeats frame's
    rows = index.droplevel(REPEAT)
    return frame, pd.factorize(rows)[0].astype(np.intp)


def reduce_repeats(frame: pd.DataFrame, how: str) -> pd.DataFrame:
    """A long repeats frame (index level `repeat`) as one row per row: `mean` averages each question's
    probabilities and decides by the most likely option; `majority` takes each row's most common
    decision, with the shares of the votes as its probabilities (so Brier and ECE score the vote)."""
    if how not in REDUCERS:
        raise InvalidRequest("reduce", f"one of {', '.join(map(repr, REDUCERS))}, or None to pool the repeats; "
                                       f"got {how!r}")
    if REPEAT not in (frame.index.names or []):
        raise InvalidRequest("reduce", f"the frame has no {REPEAT!r} index level: pass a result's "
                                       "repeats_frame()")
    keys = [n for n in frame.index.names if n != REPEAT]
    groups = frame.groupby(level=keys if len(keys) > 1 else keys[0], sort=False)
    numeric = [c for c in frame.columns  # the answers' numbers; the input columns (labels) are the row's
               if tidy.SEP in str(c) and not str(c).startswith(tidy.SEP) and pd.api.types.is_numeric_dtype(frame[c])]
    out = groups.first()
    out[numeric] = groups[numeric].mean()
    for q, kind in _questions(frame):
        if how == "majority":
            _votes(frame, groups, out, q, kind)
        _decide(out, q, kind)
    return out


def _questions(frame: pd.DataFrame) -> list[tuple[str, str]]:
    found = []
    for column in map(str, frame.columns):
        for kind in tidy.DECIDED:
            q = tidy.question_of(column, kind)
            if q is not None:
                found.append((q, kind))
    return found


def _votes(frame: pd.DataFrame, groups: object, out: pd.DataFrame, q: str, kind: str) -> None:
    """A question's probabilities replaced by its repeats' vote shares."""
    if kind == tidy.NOUL:
        noul = tidy.column(q, tidy.NOUL)
        votes = (frame[noul] >= tidy.CUT).where(frame[noul].notna())
        out[noul] = votes.astype(float).groupby(level=list(out.index.names), sort=False).mean()
        return
    decided = frame[tidy.column(q, kind)]
    for option in tidy.options_of(q, frame.columns):
        hit = decided.astype(str) == (option if kind == tidy.CHOICE else str(int(option)))
        share = hit.where(decided.notna()).astype(float)
        out[tidy.probability(q, option)] = share.groupby(level=list(out.index.names), sort=False).mean()


def _decide(out: pd.DataFrame, q: str, kind: str) -> None:
    """The row's decision from its (reduced) probabilities: the most likely option, ties to the first."""
    if kind == tidy.NOUL:
        return
    names = np.array(tidy.options_of(q, out.columns), dtype=object)
    if not len(names):
        return
    probs = out[[tidy.probability(q, option) for option in names]].to_numpy(float)
    best = np.nan_to_num(probs, nan=-1.0).argmax(axis=1)
    empty = np.isnan(probs).all(axis=1)
    if kind == tidy.CHOICE:
        none = np.array(None, dtype=object)
        out[tidy.column(q, tidy.CHOICE)] = pd.array(np.where(empty, none, names[best]), dtype="str")
    else:
        levels = names.astype(float)
        out[tidy.column(q, tidy.LEVEL)] = pd.array(np.where(empty, np.nan, levels[best]), dtype="Int64")
        if tidy.column(q, tidy.SCORE) in out.columns:
            out[tidy.column(q, tidy.SCORE)] = np.where(empty, np.nan, np.nan_to_num(probs) @ levels)
