"""DecisionExplorer and UsageDashboard in a real JupyterLab: edit, run, bars; the live ledger table."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.lab import Lab, assert_no_secret, image, run_first_cell

pytest.importorskip("playwright")
from playwright.sync_api import expect

OPEN_BOTH = """\
import gwlab
from gwlab.widgets import DecisionExplorer, UsageDashboard
from IPython.display import display

gw = gwlab.connect()  # GWLAB_BASE_URL and GWLAB_API_KEY come from the server's environment
for ticket in ["Refund please", "Site is down!", "Add dark mode?"]:  # some history for the dashboard
    gw.decide(ticket, {"urgent": {"type": "noul", "instructions": "Urgent?",
                                  "criteria": {"true": "broken now", "false": "can wait"}}},
              model="local/decide-e5-small")
display(DecisionExplorer(gw, state="The checkout page has been down for an hour and customers cannot pay."))
display(UsageDashboard(gw, interval=1.0))
"""


def test_explorer_runs_edited_questions_and_the_dashboard_shows_the_call(lab: Lab, launch: Any,
                                                                          gateway: Any) -> None:
    path = lab.notebook("explorer_dashboard.ipynb", OPEN_BOTH)
    page = launch()
    run_first_cell(page, lab, path.name)
    explorer, dashboard = page.locator(".gwlab-de"), page.locator(".gwlab-ud")
    explorer.wait_for(timeout=180_000)
    questions = explorer.locator("[data-role=questions]")
    questions.fill('{"urgent": {"type": "noul", "instructions": "Urgent?", "criteria": {"yes": "now"}}}')
    expect(explorer.locator("[data-role=error]")).to_contain_text("questions.urgent.criteria", timeout=30_000)
    questions.fill('{"urgent": {"type": "noul", "instructions": "Does this need action today?", "criteria": '
                   '{"true": "something is broken now", "false": "it can wait"}}, "topic": {"type": "choice", '
                   '"instructions": "What is it about?", "criteria": {"billing": "payments and invoices", '
                   '"outage": "the service is down", "feature": "a request for something new"}}}')
    expect(explorer.locator("[data-role=error]")).to_have_text("", timeout=30_000)
    explorer.locator("[data-role=run]").click()
    expect(explorer.locator("[data-role=answer]")).to_have_count(2, timeout=120_000)
    expect(explorer.locator(".bar")).to_have_count(5)  # true/false + three topics
    expect(explorer.locator("[data-role=python]")).to_contain_text("QUESTIONS = {'urgent'")
    expect(dashboard.locator("tbody tr").first).to_contain_text("/decisions", timeout=60_000)
    expect(dashboard.locator("[data-role=summary]")).to_contain_text("4 calls", timeout=30_000)
    expect(dashboard.locator("[data-role=plot]")).to_be_visible(timeout=60_000)
    explorer.screenshot(path=str(image("decision_explorer.png")))
    dashboard.screenshot(path=str(image("usage_dashboard.png")))
    assert_no_secret(page, gateway.api_key)
