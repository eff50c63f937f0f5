"""Decisions on the real gateway: System One exactly shaped, OpenAI's shape, and both official clients."""

from __future__ import annotations

import io
import math
from typing import Any

import httpx
import openai
import pytest
import typesafe_sdk as ts

from tests.support.gateways import RunningGateway
from tests.support.models import DECIDE_MODEL

MODEL = DECIDE_MODEL
STATE = {"message": "I was charged twice for my order and want my money back today"}
QUESTIONS: dict[str, Any] = {
    "is_billing": {"type": "noul", "instructions": "Is this about billing?"},
    "described": {"type": "noul", "criteria": {"true": "a payment problem", "false": "anything else"}},
    "team": {"type": "choice", "instructions": "Which team should handle it?",
             "criteria": {"billing": "payments, refunds and invoices", "technical": "bugs and crashes",
                          "sales": None}},
    "urgency": {"type": "score", "instructions": "How urgent is it?",
                "criteria": ["Can wait", "This week", "Today", "Right now"]},
}
ANSWER_KEYS = {"noul": {"type", "noul"}, "choice": {"type", "choice", "confidence", "probabilities"},
               "score": {"type", "score", "confidence", "legend", "probabilities"}}


def _post(gateway: RunningGateway, path: str, body: Any, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {gateway.api_key}", **kw.pop("headers", {})}
    return httpx.post(f"{gateway.base_url}{path}", json=body, headers=headers, timeout=30, **kw)


def _body(**changes: Any) -> dict[str, Any]:
    return {"model": MODEL, "state": STATE, "questions": QUESTIONS, **changes}


@pytest.mark.parametrize("path", ["/decisions", "/systemone"])
def test_system_one_answers_are_exactly_shaped_per_type(gateway: RunningGateway, path: str) -> None:
    r = _post(gateway, path, _body())
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"model", "answers", "usage"} and body["model"] == MODEL
    answers = body["answers"]
    assert set(answers) == set(QUESTIONS)
    for qid, question in QUESTIONS.items():
        assert set(answers[qid]) == ANSWER_KEYS[question["type"]] and answers[qid]["type"] == question["type"]
    for qid in ("is_billing", "described"):
        assert 0.0 <= answers[qid]["noul"] <= 1.0

    team = answers["team"]
    assert set(team["probabilities"]) == set(QUESTIONS["team"]["criteria"])
    assert math.isclose(sum(team["probabilities"].values()), 1.0, abs_tol=1e-6)
    assert team["choice"] == max(team["probabilities"], key=team["probabilities"].get)
    assert 0.0 <= team["confidence"] <= 1.0

    urgency, levels = answers["urgency"], QUESTIONS["urgency"]["criteria"]
    keys = [str(n) for n in range(len(levels))]
    assert urgency["legend"] == dict(zip(keys, levels, strict=True))
    assert sorted(urgency["probabilities"]) == keys
    assert math.isclose(sum(urgency["probabilities"].values()), 1.0, abs_tol=1e-6)
    expected = sum(int(k) * p for k, p in urgency["probabilities"].items())
    assert math.isclose(urgency["score"], expected, abs_tol=1e-6)
    assert 0.0 <= urgency["score"] <= len(levels) - 1 and 0.0 <= urgency["confidence"] <= 1.0


def test_usage_counts_real_input_tokens_and_no_output_tokens(gateway: RunningGateway) -> None:
    small = _post(gateway, "/decisions", _body(questions={"q": QUESTIONS["is_billing"]})).json()["usage"]
    large = _post(gateway, "/decisions", _body()).json()["usage"]
    assert small["input_tokens"] > 0 and small["output_tokens"] == 0 and large["output_tokens"] == 0
    assert large["input_tokens"] > small["input_tokens"]  # more questions, more input (spec rule 2)


def test_a_plain_string_state_is_accepted(gateway: RunningGateway) -> None:
    r = _post(gateway, "/decisions", _body(state="The app crashes when I open settings"))
    assert r.status_code == 200 and r.json()["answers"]["team"]["choice"] in QUESTIONS["team"]["criteria"]


@pytest.mark.parametrize(("path", "param_of"), [
    ("/decisions", lambda b: b["error"]["param"]),
    ("/systemone", lambda b: b["detail"]["param"]),
])
def test_stream_true_is_400_naming_stream(gateway: RunningGateway, path: str, param_of: Any) -> None:
    r = _post(gateway, path, _body(stream=True))
    assert r.status_code == 400 and param_of(r.json()) == "stream"


def test_256_choice_options_are_400_naming_the_criteria(gateway: RunningGateway) -> None:
    criteria = {f"option_{n}": None for n in range(256)}
    r = _post(gateway, "/decisions", _body(questions={"pick": {"type": "choice", "criteria": criteria}}))
    assert r.status_code == 400 and r.json()["error"]["param"] == "questions.pick.criteria"
    fine = _post(gateway, "/decisions", _body(questions={"pick": {"type": "choice", "criteria": dict(
        list(criteria.items())[:255])}}))
    assert fine.status_code == 200 and len(fine.json()["answers"]["pick"]["probabilities"]) == 255


def test_11_score_levels_are_400_naming_the_criteria(gateway: RunningGateway) -> None:
    levels = [f"level {n}" for n in range(11)]
    r = _post(gateway, "/systemone", _body(questions={"rate": {"type": "score", "criteria": levels}}))
    assert r.status_code == 400 and r.json()["detail"]["param"] == "questions.rate.criteria"
    assert r.headers["x-typesafe-request-id"] == r.headers["x-request-id"]


@pytest.mark.parametrize(("body", "param"), [
    ({"model": MODEL, "questions": QUESTIONS}, "state"),
    ({"state": "x", "questions": QUESTIONS}, "model"),
    ({"model": MODEL, "state": "x"}, "questions"),
    ({"model": MODEL, "state": "x", "questions": {}}, "questions"),
    ({"model": MODEL, "state": "x", "questions": {"q": {"type": "maybe"}}}, "questions.q.type"),
    ({"model": MODEL, "state": "x", "questions": {"q": {"type": "noul", "criteria": {"yes": "a"}}}},
     "questions.q.criteria.yes"),
])
def test_invalid_system_one_bodies_are_400_naming_the_field(gateway: RunningGateway, body: dict,
                                                            param: str) -> None:
    r = _post(gateway, "/decisions", body)
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_unknown_model_is_404_and_a_model_of_another_family_is_400(gateway: RunningGateway) -> None:
    missing = _post(gateway, "/decisions", _body(model="jev-latest"))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
    other = _post(gateway, "/systemone", _body(model="local/video-preview"))
    assert other.status_code == 400 and other.json()["detail"]["param"] == "model"


def test_json_assets_are_refused_naming_assets(gateway: RunningGateway) -> None:
    asset = {"<image:0>": {"type": "image", "format": "png", "data_base64": "iVBORw0KGgo="}}
    r = _post(gateway, "/systemone", _body(state="Product: <image:0>", assets=asset))
    assert r.status_code == 400
    assert r.json()["detail"]["param"] == "assets" and "image assets are not supported" in r.text


def test_multipart_with_image_assets_is_415_naming_assets(gateway: RunningGateway) -> None:
    request = '{"model":"local/decide-e5-small","state":"<image:a>","questions":{"q":{"type":"noul",' \
              '"instructions":"Damaged?"}},"assets":{"<image:a>":{"type":"image","part":"asset-0"}}}'
    r = httpx.post(f"{gateway.base_url}/systemone", headers={"Authorization": f"Bearer {gateway.api_key}"},
                   files={"request": (None, request, "application/json"),
                          "asset-0": ("asset-0", b"\x89PNG\r\n\x1a\n", "image/png")}, timeout=30)
    assert r.status_code == 415
    assert r.json()["detail"]["param"] == "assets" and "image assets are not supported" in r.text


# --- OpenAI's decisions shape ------------------------------------------------------------------------

OPENAI_QUESTIONS: list[dict[str, Any]] = [
    {"type": "predicate", "name": "billing", "instructions": "Is this about billing?"},
    {"type": "choice", "instructions": "Which team?",
     "choices": [{"value": "billing", "description": "payments and refunds"}, {"value": "technical"},
                 {"value": True, "description": "anything else"}]},
    {"type": "score", "name": "urgency", "instructions": "How urgent?",
     "levels": [{"label": "low"}, {"label": "medium"}, {"label": "high", "description": "act today"}]},
]


def test_openai_shape_is_answered_in_its_own_shape_and_order(gateway: RunningGateway) -> None:
    body = {"model": MODEL, "input": STATE["message"], "questions": OPENAI_QUESTIONS}
    r = _post(gateway, "/decisions", body)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == MODEL and [a["type"] for a in body["answers"]] == ["predicate", "choice", "score"]
    predicate, choice, score = body["answers"]
    assert predicate["name"] == "billing" and 0.0 <= predicate["probability"] <= 1.0
    assert [p["value"] for p in choice["probabilities"]] == ["billing", "technical", True]
    assert math.isclose(sum(p["probability"] for p in choice["probabilities"]), 1.0, abs_tol=1e-6)
    assert choice["choice"] in ("billing", "technical", True)
    levels = [(p["value"], p["label"]) for p in score["probabilities"]]
    assert levels == [(0, "low"), (1, "medium"), (2, "high")]
    assert score["name"] == "urgency"
    assert math.isclose(score["score"], sum(p["value"] * p["probability"] for p in score["probabilities"]),
                        abs_tol=1e-6)
    usage = body["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] == 0
    assert usage["total_tokens"] == usage["input_tokens"]


def test_openai_shape_errors_name_the_field_in_that_shape(gateway: RunningGateway) -> None:
    bad = [*OPENAI_QUESTIONS[:1], {"type": "choice", "instructions": "x", "choices": [{"value": "only"}]}]
    r = _post(gateway, "/decisions", {"model": MODEL, "input": "x", "questions": bad})
    assert r.status_code == 400 and r.json()["error"]["param"] == "questions.1.choices"


def test_openai_shape_input_images_are_refused_naming_the_part(gateway: RunningGateway) -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBO"}
    message = {"role": "user", "content": [{"type": "input_text", "text": "Is it damaged?"}, image]}
    r = _post(gateway, "/decisions", {"model": MODEL, "input": [message], "questions": OPENAI_QUESTIONS})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input.0.content.1"
    assert "image" in r.json()["error"]["message"]


def test_openai_sdk_decisions_create(gateway: RunningGateway) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0)
    decision = client.decisions.create(model=MODEL, input=[{"role": "user", "content": STATE["message"]}],
                                       questions=OPENAI_QUESTIONS)
    assert [a.type for a in decision.answers] == ["predicate", "choice", "score"]
    assert 0.0 <= decision.answers[0].probability <= 1.0
    assert decision.answers[1].choice in ("billing", "technical", True)
    assert decision.model == MODEL and decision.usage.input_tokens > 0
    with pytest.raises(openai.BadRequestError) as caught:
        client.decisions.create(model=MODEL, input="x", questions=[{"type": "predicate"}])
    assert caught.value.param == "questions.0.instructions"
    with pytest.raises(openai.NotFoundError):
        client.decisions.create(model="gpt-6-luna", input="x", questions=OPENAI_QUESTIONS)


# --- typesafe-sdk ---------------------------------------------------------------------------------------


@pytest.fixture
def typesafe(gateway: RunningGateway) -> ts.TypeSafeClient:
    with ts.TypeSafeClient(api_key=gateway.api_key, base_url=gateway.api_host, model=MODEL,
                           retry=ts.RetryPolicy(max_retries=0)) as client:
        yield client


def test_typesafe_sdk_system_one_parses_every_answer_type(typesafe: ts.TypeSafeClient) -> None:
    result = typesafe.system_one(
        state=STATE,
        questions={"is_billing": ts.Noul(instructions="Is this about billing?"),
                   "team": ts.Choice(instructions="Which team?",
                                     criteria={"billing": None, "technical": None}),
                   "urgency": ts.Score(instructions="How urgent?", criteria=["Can wait", "Today"])})
    assert result.model == MODEL and result.request_id.startswith("req_")
    assert 0.0 <= result.nouls["is_billing"].noul <= 1.0
    assert result.choices["team"].choice in ("billing", "technical")
    assert set(result.scores["urgency"].legend) == {0, 1}
    assert result.usage.input_tokens > 0 and result.usage.output_tokens == 0


def test_typesafe_sdk_lists_the_models(typesafe: ts.TypeSafeClient) -> None:
    names = [m.name for m in typesafe.models.list().models]
    assert MODEL in names


def test_typesafe_sdk_reads_gateway_errors(typesafe: ts.TypeSafeClient, gateway: RunningGateway) -> None:
    with pytest.raises(ts.TypeSafeBadRequestError) as caught:
        typesafe.system_one(state="x", questions={"r": ts.Score(criteria=[f"l{n}" for n in range(11)])})
    assert "questions.r.criteria" in str(caught.value) and caught.value.request_id.startswith("req_")
    with ts.TypeSafeClient(api_key="gwl_not_a_key", base_url=gateway.api_host, model=MODEL,
                           retry=ts.RetryPolicy(max_retries=0)) as stranger, \
            pytest.raises(ts.TypeSafeAuthenticationError):
        stranger.models.list()


def test_typesafe_sdk_image_asset_is_refused_clearly(typesafe: ts.TypeSafeClient) -> None:
    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, format="PNG")
    photo = ts.Image(png.getvalue())
    with pytest.raises(ts.TypeSafeAPIError) as caught:
        typesafe.system_one(state=photo, questions={"damaged": ts.Noul(instructions="Is it damaged?")})
    assert caught.value.status == 415 and "image assets are not supported" in str(caught.value)


LONG_STATE = "The checkout page crashes whenever I pay with my card, and support has not answered. " * 2400


@pytest.mark.parametrize("path", ["/decisions", "/systemone"])
def test_state_over_the_input_limit_is_a_400_naming_state_and_the_limit(gateway: RunningGateway, path: str) -> None:
    r = _post(gateway, path, _body(state=LONG_STATE))  # ~200 KB: minutes of windowed embedding before
    assert r.status_code == 400, r.text[:300]
    text = r.text
    assert "state" in text and "512" in text and "local/decide-e5-small" in text


def test_state_just_over_the_limit_is_refused_with_its_exact_token_count(gateway: RunningGateway) -> None:
    r = _post(gateway, "/decisions", _body(state="word " * 600))
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == "state" and error["code"] == "context_length_exceeded"
    assert "is 60" in error["message"] and "at most 512 tokens" in error["message"]  # 600 words + specials


def test_openai_shape_input_over_the_limit_names_input(gateway: RunningGateway) -> None:
    body = {"model": MODEL, "input": LONG_STATE, "questions": OPENAI_QUESTIONS}
    r = _post(gateway, "/decisions", body)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"


def test_state_within_the_limit_is_answered_and_billed_in_full(gateway: RunningGateway) -> None:
    r = _post(gateway, "/decisions", _body(state="word " * 400))
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["input_tokens"] > 400
