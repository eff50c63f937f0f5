"""After a cascade, everything that reads a question's answers reads what the cascade delivered (issue 31
point 4): `gwlab.run_answers` of the run's id, `gwlab.compare` (with frames or run ids) and the plots; the
cheap model alone stays one explicit name away (`{q}__proxy`, or the run id in `.run.cascade["proxy_run"]`).
Real embedded gateway, the label column as oracle."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

import gwlab
import gwlab.plots
from gwlab.client.gateway import Gateway
from gwlab.frames.store.stores import ENV_CHECKPOINT
from tests.support.messages import QUESTIONS, support_messages

TEAM = {"team": QUESTIONS["team"]}


@pytest.fixture(scope="module")
def messages() -> pd.DataFrame:
    return support_messages(40)


@pytest.fixture
def delivered(messages: pd.DataFrame, gw: Gateway, tmp_path, monkeypatch) -> pd.DataFrame:
    monkeypatch.setenv(ENV_CHECKPOINT, str(tmp_path / "default.sqlite"))  # run ids are read from the default
    cascade = gwlab.Cascade(oracle=messages["team"], target=0.9, delta=0.2, sample=20, seed=1)
    return messages.gw.decide("{text}", TEAM, gateway=gw, progress=False, cascade=cascade)


def test_run_answers_of_a_cascade_are_its_delivered_answers(delivered: pd.DataFrame,
                                                            messages: pd.DataFrame) -> None:
    back = gwlab.run_answers(delivered.run.run_id)
    mine = [c for c in delivered.columns if c not in messages.columns]
    assert sorted(back.columns) == sorted(mine)
    pd.testing.assert_frame_equal(back[mine], pd.DataFrame(delivered[mine]))
    assert (back["team__choice"] == back["team__answer"]).all()  # the question's own column: delivered
    proxy = gwlab.run_answers(delivered.run.cascade["proxy_run"])  # the cheap model alone, by its own id
    pd.testing.assert_series_equal(proxy["team__choice"], delivered["team__proxy__choice"], check_names=False)
    oracle = delivered["team__source"] == "oracle"
    assert oracle.any() and (back.loc[oracle, "team__choice"] != proxy.loc[oracle, "team__choice"]).any()


def test_a_cascade_is_one_run_whose_record_counts_the_oracle_too(delivered: pd.DataFrame, gw: Gateway) -> None:
    listed = gwlab.runs().set_index("run_id")
    record, proxy = listed.loc[delivered.run.run_id], listed.loc[delivered.run.cascade["proxy_run"]]
    assert record["sent"] == proxy["sent"] + delivered.run.cascade["oracle_sent"]  # labels: nothing sent
    assert record["ledger_run"] == proxy["ledger_run"] == delivered.run.run_id  # every call carries the id
    assert (gw.usage["run"] == delivered.run.run_id).sum() == proxy["sent"]


def test_compare_after_a_cascade_reads_the_delivered_answers(delivered: pd.DataFrame,
                                                             messages: pd.DataFrame) -> None:
    proxy = delivered[["team__proxy__choice"]].rename(columns={"team__proxy__choice": "team__choice"})
    by_frame = gwlab.compare(proxy, delivered, messages["team"], questions=TEAM)
    by_run = gwlab.compare(delivered.run.cascade["proxy_run"], delivered.run.run_id, messages["team"],
                           questions=TEAM)
    right = (delivered["team__answer"] == messages["team"]).mean()
    cheap = (delivered["team__proxy__choice"] == messages["team"]).mean()
    for table in (by_frame.table, by_run.table):
        accuracy = table.xs("accuracy", level="metric").iloc[0]
        assert accuracy["b"] == pytest.approx(right) and accuracy["a"] == pytest.approx(cheap)
    assert right > cheap  # the oracle's rows: not the cheap model's answers scored twice


def test_plots_after_a_cascade_show_the_delivered_answers(delivered: pd.DataFrame, messages: pd.DataFrame) -> None:
    evaluation = gwlab.evaluate(delivered.assign(truth=messages["team"]), truth="truth", prob="team",
                                questions=TEAM)
    table = evaluation.reliability["team"]
    assert set(table.loc[table["count"] > 0, "mean_prob"].round(6)) <= {0.0, 1.0}  # hard answers: one-hot
    ax = gwlab.plots.reliability(evaluation)
    assert f"{int(table['count'].sum())} rows" in ax.get_title()
    ax = gwlab.plots.probabilities(delivered, "team")
    drawn = {round(float(v), 6) for line in ax.get_lines() for v in line.get_ydata()}
    assert drawn <= {0.0, 1.0}
    cheap = gwlab.plots.probabilities(delivered, "team__proxy")
    assert {round(float(v), 6) for line in cheap.get_lines() for v in line.get_ydata()} - {0.0, 1.0}
