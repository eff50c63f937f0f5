"""Matplotlib figures for answers, evaluations and usage. Each draws on `ax` (or a new one) and returns it.

matplotlib is imported inside each function: `import gwlab` must not pay for it, and it is the
`notebook` extra's dependency, not a core one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from gwlab.errors import InvalidRequest
from gwlab.frames import columns as tidy
from gwlab.frames.evaluation import evidence, tables
from gwlab.frames.evaluation.targets import probability_columns
from gwlab.frames.run import usage as _usage

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from gwlab.frames.evaluation.evaluate import Evaluation

__all__ = ["confusion", "cost_per_run", "latency", "probabilities", "reliability", "scores", "slices",
           "usage_over_time"]


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots()[1]


def _one(tables: Mapping[str, Any], question: str | None, what: str) -> tuple[str, Any]:
    if question is None:
        if len(tables) != 1:
            raise InvalidRequest("question", f"the evaluation has {len(tables)} {what} tables; name one "
                                             f"of {sorted(tables)}")
        question = next(iter(tables))
    if question not in tables:
        raise InvalidRequest("question", f"no {what} table for {question!r}; have {sorted(tables)}")
    return question, tables[question]


def reliability(evaluation: Evaluation | pd.DataFrame, question: str | None = None, *,
                ax: Axes | None = None, rows: Any = None, label: str | None = None) -> Axes:
    """Reliability diagram: observed rate against mean predicted probability per bin, counts behind.

    The bars (right axis) show how many rows fell in each bin, so a point far from the diagonal can
    be read against how much evidence it stands on. `rows` (a boolean mask over the evaluated frame, or
    its index labels) plots only those rows, e.g. the held-out half, with their own ECE; `label` names
    them in the title. The title gives the ECE with the rows and bins it was computed over: the same
    question's ECE differs between all rows and a held-out half, and a figure must say which one it
    shows. The legend sits below the axes, never over the curve.
    """
    ax = _axes(ax)
    if isinstance(evaluation, pd.DataFrame):
        if rows is not None:
            raise InvalidRequest("rows", "selects rows of an Evaluation; a reliability table is already binned")
        table, title, level = evaluation, label or "reliability", 0.95
    else:
        level = evaluation.level
        question, table = _one(evaluation.reliability, question, "reliability")
        ece = evaluation.metrics["ece"].astype(float).loc[question]
        if rows is not None:
            table = evidence.reliability_intervals(_reliability_of(evaluation, question, rows), level)
            ece = tables.ece(table)
        which = f"{label}, " if label else ""
        title = f"{question}: ECE {ece:.3f}\n({which}{int(table['count'].sum())} rows, {len(table)} bins)"
    _draw_reliability(ax, table, title, level)
    return ax


def _reliability_of(evaluation: Evaluation, question: str, rows: Any) -> pd.DataFrame:
    """The question's reliability bins over the selected rows of the evaluated frame only."""
    frame = evaluation.frame
    if frame is None:
        raise InvalidRequest("rows", "this evaluation kept no reference to its frame, so rows cannot be chosen")
    target = evaluation.targets[question]
    if target.proba is None:
        raise InvalidRequest("question", f"{question!r} has no probabilities to plot")
    keep = _row_mask(frame, rows)[target.positions]
    return tables.reliability(target.proba[keep], target.y[keep], target.kind, evaluation.bins)


def _row_mask(frame: pd.DataFrame, rows: Any) -> np.ndarray:
    """`rows` as one boolean per row of `frame`: a boolean mask (aligned on the frame) or index labels."""
    if isinstance(rows, str):
        raise InvalidRequest("rows", f"selects the rows plotted: a boolean mask or index labels of the "
                                     f"evaluated frame, not text ({rows!r}); name them in the title with label=")
    if isinstance(rows, pd.Series) and pd.api.types.is_bool_dtype(rows.dtype):
        if not rows.index.equals(frame.index):
            raise InvalidRequest("rows", "a boolean Series must have the evaluated frame's index")
        return rows.to_numpy(dtype=bool)
    values = np.asarray(rows)
    if values.dtype == bool:
        if values.shape != (len(frame),):
            raise InvalidRequest("rows", f"a mask needs one boolean per row ({len(frame)}); got {values.shape}")
        return values
    mask = frame.index.isin(list(rows))
    if not mask.any():
        raise InvalidRequest("rows", "none of these index labels is in the evaluated frame")
    return mask


def _draw_reliability(ax: Axes, table: pd.DataFrame, title: str, level: float) -> None:
    counts = ax.twinx()
    width = (table["upper"] - table["lower"]).to_numpy()
    counts.bar(table["lower"], table["count"], width=width, align="edge", color="0.85", label="rows")
    counts.set_ylabel("rows per bin")
    ax.set_zorder(counts.get_zorder() + 1)  # the curve in front of the bars
    ax.patch.set_visible(False)
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.5", label="perfectly calibrated")
    used = table[table["count"] > 0]
    ax.plot(used["mean_prob"], used["observed"], marker="o", label="observed")
    if "observed_low" in used.columns:  # each bin's Wilson interval: how far its point could move
        ax.vlines(used["mean_prob"], used["observed_low"], used["observed_high"], color="C0", alpha=0.5,
                  label=f"{level:.0%} interval")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean predicted probability", ylabel="observed rate", title=title)
    handles = [*ax.get_legend_handles_labels()[0], *counts.get_legend_handles_labels()[0]]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False,
              fontsize="small")


def slices(evaluation: Evaluation, metric: str = "accuracy", question: str | None = None, *,
           ax: Axes | None = None) -> Axes:
    """One metric per slice (``evaluate(..., by=...)``; without `by`, per question) with its interval.

    Each row is labelled with its row count; slices flagged ``small`` are drawn hollow and say so, so
    a wide bar on few rows is not read like a narrow one.
    """
    ax = _axes(ax)
    table = evaluation.metrics
    if metric not in table.columns or f"{metric}_low" not in table.columns:
        raise InvalidRequest("metric", f"no interval for {metric!r}; have "
                                       f"{[c[:-4] for c in table.columns if str(c).endswith('_low')]}")
    if table.index.nlevels > 1:
        questions = list(dict.fromkeys(table.index.get_level_values(0)))
        question = question if question is not None else questions[0] if len(questions) == 1 else None
        if question not in questions:
            raise InvalidRequest("question", f"name one of {questions}; got {question!r}")
        table = pd.DataFrame(table.xs(question, level=0))  # a frame: the level's rows, every column
    rows = table[table[metric].notna()]
    y = np.arange(len(rows))[::-1]
    small = rows["small"].astype(bool).to_numpy() if "small" in rows.columns else np.zeros(len(rows), bool)
    value, low, high = (rows[c].to_numpy(float) for c in (metric, f"{metric}_low", f"{metric}_high"))
    ax.hlines(y, low, high, color="C0")
    ax.scatter(value[~small], y[~small], color="C0", zorder=3, label="estimate")
    if small.any():
        ax.scatter(value[small], y[small], facecolors="none", edgecolors="C3", zorder=3, label="small sample")
    labels = [f"{_slice_name(key)} (n={int(n)}{', small' if s else ''})"
              for key, n, s in zip(rows.index, rows["n"], small, strict=True)]
    ax.set_yticks(y, labels=labels)
    which = f"{question}: " if question else ""
    ax.set(xlabel=f"{metric} ({getattr(evaluation, 'level', 0.95):.0%} interval)", title=f"{which}{metric} by slice")
    if small.any():
        ax.legend(loc="best", fontsize="small")
    return ax


def _slice_name(key: Any) -> str:
    return " / ".join(map(str, key)) if isinstance(key, tuple) else str(key)


def probabilities(frame: pd.DataFrame, question: str, *, ax: Axes | None = None) -> Axes:
    """Distribution of each option's probability (a box per option; noul: P(true))."""
    ax = _axes(ax)
    _, kind, columns = probability_columns(frame, question)
    data = [pd.to_numeric(frame[c], errors="coerce").dropna().to_numpy() for c in columns.values()]
    ax.boxplot(data, tick_labels=list(columns))
    ax.set(ylim=(-0.02, 1.02), ylabel="probability", xlabel="option" if kind != "noul" else "",
           title=f"{question}: probability per option")
    return ax


def scores(frame: pd.DataFrame, question: str, *, ax: Axes | None = None, bins: int = 20) -> Axes:
    """Histogram of a score question's expected level (`{q}__score`), one tick per level."""
    ax = _axes(ax)
    stem = tidy.question_of(question, tidy.SCORE) or question
    name = tidy.column(stem, tidy.SCORE)
    if name not in frame.columns:
        raise InvalidRequest("question", f"no column {name!r} in the frame")
    values = pd.to_numeric(frame[name], errors="coerce").dropna()
    levels = [c for c in frame.columns if str(c).startswith(tidy.probability_prefix(stem))]
    top = max(len(levels) - 1, int(np.ceil(values.max())) if len(values) else 1)
    ax.hist(values, bins=np.linspace(0, top, bins + 1).tolist(), color="C0")
    ax.set_xticks(range(top + 1))
    ax.set(xlabel="score (level)", ylabel="rows", title=f"{stem}: score distribution")
    return ax


def confusion(evaluation: Evaluation, question: str | None = None, *, ax: Axes | None = None,
              normalize: bool = False) -> Axes:
    """Confusion matrix as a heat map with the count (or row share) written in each cell."""
    ax = _axes(ax)
    question, table = _one(evaluation.confusion, question, "confusion")
    values = table.to_numpy(dtype=float)
    if normalize:
        sums = values.sum(axis=1, keepdims=True)
        values = np.divide(values, sums, out=np.zeros_like(values), where=sums > 0)
    ax.imshow(values, cmap="Blues")
    ax.set_xticks(range(len(table.columns)), labels=list(table.columns), rotation=45, ha="right")
    ax.set_yticks(range(len(table.index)), labels=list(table.index))
    high = values.max() if values.size else 0
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            text = f"{values[i, j]:.2f}" if normalize else f"{int(values[i, j])}"
            ink = "white" if values[i, j] > high / 2 else "black"
            ax.text(j, i, text, ha="center", va="center", color=ink)
    ax.set(xlabel="predicted", ylabel="truth", title=f"{question}: confusion")
    return ax


def usage_over_time(usage: pd.DataFrame, *, ax: Axes | None = None, tokens: str = "input_tokens") -> Axes:
    """Cumulative tokens over time, one line per model, on a date axis in UTC.

    Calls that name no model (``GET /models``) are the `NO_MODEL` group of `summarize`; they are drawn
    only if they used tokens, since a flat line at zero says nothing.
    """
    import matplotlib.dates as mdates

    ax = _axes(ax)
    time = _times(_usage.column(usage, "time"))
    amount = pd.to_numeric(_usage.column(usage, tokens), errors="coerce").fillna(0).to_numpy()
    model = _usage.column(usage, "model", required=False)
    models = _model_names(model, len(usage))
    work = pd.DataFrame({"time": time.to_numpy(), "tokens": amount, "model": models}).sort_values("time")
    for name, group in work.groupby("model", sort=True):
        if name == _usage.NO_MODEL and not group["tokens"].any():
            continue
        ax.step(group["time"], group["tokens"].cumsum(), where="post", label=str(name))
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set(xlabel="time (UTC)", ylabel=f"cumulative {tokens.replace('_', ' ')}", title="usage over time")
    if ax.lines:
        ax.legend(loc="upper left", fontsize="small")
    return ax


def _model_names(model: pd.Series | None, n: int) -> np.ndarray:
    """Each row's model as text; rows that name none (NaN, None, "") are `NO_MODEL`, as in summarize."""
    if model is None:
        return np.full(n, "all", dtype=object)
    names = model.astype(object).where(model.notna() & (model.astype(str).str.strip() != ""), _usage.NO_MODEL)
    return names.astype(str).to_numpy()


def latency(usage: pd.DataFrame, *, ax: Axes | None = None, bins: int = 30) -> Axes:
    """Histogram of request latency in milliseconds, with the median marked."""
    ax = _axes(ax)
    values = pd.to_numeric(_usage.column(usage, "latency_ms"), errors="coerce").dropna()
    ax.hist(values, bins=bins, color="C0")
    if len(values):
        ax.axvline(values.median(), color="C1", linestyle="--", label=f"median {values.median():.0f} ms")
        ax.legend()
    ax.set(xlabel="latency (ms)", ylabel="requests", title="latency")
    return ax


def cost_per_run(usage: pd.DataFrame, prices: Any = None, *, ax: Axes | None = None) -> Axes:
    """Bar per run: dollars from the price table (decisions charge input tokens only).

    A run with a call of unknown price has no bar and is labelled "cost unknown": drawing it as $0
    would be a wrong number that looks right."""
    ax = _axes(ax)
    table = _usage.summarize(usage, prices, by=("run",))
    runs = [str(r) or "(no run)" for r in table.index]
    costs = table["cost"].to_numpy(dtype=float)
    ax.bar(runs, costs, color="C2")
    for x, cost in enumerate(costs):
        if cost != cost:  # NaN: some call of this run has no price
            ax.annotate("cost unknown", (x, 0), ha="center", va="bottom", rotation=90, color="C3")
    ax.set(xlabel="run", ylabel="cost (USD)", title="cost per run")
    ax.tick_params(axis="x", rotation=45)
    return ax


def _times(series: pd.Series) -> pd.Series:
    """Unix seconds or milliseconds, strings or datetimes, as datetimes (spec: time fields vary)."""
    if pd.api.types.is_datetime64_any_dtype(series):
        return _naive_utc(series)
    numbers = pd.to_numeric(series, errors="coerce")
    if numbers.notna().all():
        unit: Literal["ms", "s"] = "ms" if numbers.median() > 1e11 else "s"
        return pd.to_datetime(numbers, unit=unit)
    return _naive_utc(pd.to_datetime(series, errors="coerce", utc=True))


def _naive_utc(series: pd.Series) -> pd.Series:
    """Datetimes in UTC without a zone: what matplotlib's date axis plots as given (labelled UTC)."""
    if getattr(series.dt, "tz", None) is not None:
        naive: pd.Series = series.dt.tz_convert("UTC").dt.tz_localize(None)
        return naive
    return series
