"""Every request body the client sends for chat, responses and models, validated against the official
OpenAI schemas (vendored in tests/contracts/openai, see tests/support/contracts.py).

The bodies are the real ones: a pass-through transport records each request on its way to the real
embedded gateway. Table-driven over the client's features; each case also names the endpoints it must
have reached, so a case cannot pass by sending nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pandas as pd
import pytest

from gwlab import Gateway
from tests.support.contracts import Recording, violations

TEXT = "local/gemma-3-270m"
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                              "parameters": WEATHER}}  # no `strict`, as users write them
FLAT_TOOL = {"type": "function", "name": "get_weather", "description": "Weather for a city", "parameters": WEATHER}
FUNCTIONS = {"get_weather": lambda city: {"city": city, "sky": "sunny"}}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
          "additionalProperties": False}
SCHEMAS = {("POST", "/v1/chat/completions"): "CreateChatCompletionRequest",
           ("POST", "/v1/responses"): "CreateResponse"}


FRAME = pd.DataFrame({"q": ["What is the weather in Paris?", "Name a fruit."]})


def _rows(gw: Gateway) -> dict[str, Any]:
    """df.gw run options: this gateway, no checkpoint (every row is sent), no progress bar."""
    return {"gateway": gw, "checkpoint": False, "progress": False}


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


CASES: dict[str, tuple[Callable[[Gateway], Any], set[str]]] = {
    "chat_plain": (lambda gw: gw.chat.create(ASK, model=TEXT, max_tokens=8), {"/v1/chat/completions"}),
    "chat_caps_and_sampling": (lambda gw: gw.chat.create("Hi", model=TEXT, max_completion_tokens=8, temperature=0.2,
                                                         top_p=0.9, seed=1, stop=["\n"], user="analyst-1",
                                                         metadata={"run": "contract"}, store=False),
                               {"/v1/chat/completions"}),
    "chat_stream": (lambda gw: _drain(gw.chat.stream(ASK, model=TEXT, max_tokens=8)), {"/v1/chat/completions"}),
    "chat_json_schema": (lambda gw: gw.chat.create("Name a person.", model=TEXT, max_tokens=24, response_format={
        "type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}),
                         {"/v1/chat/completions"}),
    "chat_with_tools": (lambda gw: gw.tools.chat_with_tools(ASK, [CHAT_TOOL], FUNCTIONS, model=TEXT,
                                                            tool_choice="required", max_rounds=2, max_tokens=40),
                        {"/v1/chat/completions"}),
    "responses_plain": (lambda gw: gw.responses.create("Hi", model=TEXT, instructions="Be brief.",
                                                       max_output_tokens=16), {"/v1/responses"}),
    "responses_stream": (lambda gw: _drain(gw.responses.stream("Hi", model=TEXT, max_output_tokens=16)),
                         {"/v1/responses"}),
    "responses_text_format": (lambda gw: gw.responses.create("Name a person.", model=TEXT, max_output_tokens=24, text={
        "format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}), {"/v1/responses"}),
    "responses_user_tools": (lambda gw: gw.responses.create("Weather in Oslo?", model=TEXT, tools=[FLAT_TOOL],
                                                            tool_choice="required", max_output_tokens=40),
                             {"/v1/responses"}),
    "respond_with_tools": (lambda gw: gw.tools.respond_with_tools("What is the weather in Paris?", [CHAT_TOOL],
                                                                  FUNCTIONS, model=TEXT, tool_choice="required",
                                                                  max_rounds=2, max_output_tokens=40),
                           {"/v1/responses"}),
    "respond_with_flat_tools": (lambda gw: gw.tools.respond_with_tools("Weather in Oslo?", [FLAT_TOOL], FUNCTIONS,
                                                                       model=TEXT, tool_choice="required",
                                                                       max_rounds=1, max_output_tokens=40),
                                {"/v1/responses"}),
    "responses_from_chat": (lambda gw: gw.responses_from_chat(model=TEXT, messages=[
        {"role": "system", "content": "Answer in one word."}, *ASK], max_tokens=16), {"/v1/responses"}),
    "responses_from_chat_tools": (lambda gw: gw.responses_from_chat(
        model=TEXT, messages=ASK, tools=[CHAT_TOOL], tool_choice="required", max_completion_tokens=40),
                                  {"/v1/responses"}),
    "models_list": (lambda gw: gw.models.list(), {"/v1/models"}),
    "frames_chat": (lambda gw: FRAME.gw.chat("{q}", system="Be brief.", max_tokens=8, params={"temperature": 0.2},
                                             **_rows(gw)), {"/v1/chat/completions"}),
    "frames_respond": (lambda gw: FRAME.gw.respond("{q}", instructions="Be brief.", max_tokens=16, **_rows(gw)),
                       {"/v1/responses"}),
    "frames_respond_tools": (lambda gw: FRAME.gw.respond("{q}", max_tokens=40, params={
        "tools": [FLAT_TOOL], "tool_choice": "required"}, **_rows(gw)), {"/v1/responses"}),
}


@pytest.fixture
def recorded(gateway) -> Iterator[tuple[Gateway, Recording]]:
    recording = Recording()
    with Gateway(gateway.base_url, gateway.api_key, http_transport=recording) as gw:
        yield gw, recording


def _violations(method: str, path: str, body: bytes) -> list[str]:
    schema = SCHEMAS.get((method, path))
    if schema is None:  # GET /models and the like: the official document gives them no body
        return [f"{method} {path} sent a body"] if body else []
    return violations(httpx.Response(200, content=body).json(), schema)


@pytest.mark.parametrize("case", CASES)
def test_every_request_the_client_sends_matches_the_official_schema(recorded, case: str) -> None:
    gw, recording = recorded
    drive, reached = CASES[case]
    drive(gw)
    assert reached <= {path for _, path, _ in recording.sent}, recording.sent
    found = [v for method, path, body in recording.sent for v in _violations(method, path, body)]
    assert not found, "\n".join(dict.fromkeys(found))
