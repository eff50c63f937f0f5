"""gwlab against llama-cpp-python's OpenAI-compatible server (a real third-party server, the packaged Gemma 270M).

It offers models and chat (with its stream); it has no responses, messages or decisions routes. Every call goes
through gwlab's public API with only `base_url` and `api_key`. Gemma 3 270M is a base model: prompts are
completion prompts, generation is greedy (temperature 0) and assertions are about the protocol, not the wording.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pandas as pd
import pytest

import gwlab
from gwlab import errors
from tests.support import servers
from tests.support.extract import assert_extract_falls_back_to_the_prompt
from tests.support.servers import RunningServer

# through the server's chat template greedy Gemma echoes this prompt over and over: it always runs to its cap
PROMPT = "Q: What colour is a banana?\nA:"
GREEDY = {"temperature": 0}


@pytest.fixture
def gw(llama_server: RunningServer) -> Iterator[gwlab.Gateway]:
    with gwlab.connect(base_url=llama_server.base_url, api_key=llama_server.api_key) as client:
        yield client


def test_models_lists_the_served_alias(gw: gwlab.Gateway, llama_server: RunningServer) -> None:
    assert llama_server.model in gw.models()


def test_chat_answers_with_usage_and_honours_the_token_cap(gw: gwlab.Gateway, llama_server: RunningServer) -> None:
    result = gw.chat(PROMPT, model=llama_server.model, max_completion_tokens=6, **GREEDY)
    assert result.text and result.finish_reason in ("stop", "length")
    assert 0 < result.usage.output_tokens <= 6  # llama.cpp reads max_tokens only (issue 13 item 1)


def test_chat_stream_ends_at_its_cap_and_its_text_is_the_result(gw: gwlab.Gateway, llama_server: RunningServer
                                                                ) -> None:
    with gw.chat.stream(PROMPT, model=llama_server.model, max_completion_tokens=5, **GREEDY) as stream:
        pieces = [chunk.text for chunk in stream]
    assert stream.ending == "capped" and not stream.complete  # finish_reason "length": capped, not cut
    assert "".join(pieces) == stream.text == stream.result.text and stream.text


def test_df_gw_chat_honours_max_tokens_on_every_row(gw: gwlab.Gateway, llama_server: RunningServer) -> None:
    fruit = pd.DataFrame({"fruit": ["banana", "cherry", "lime"]})
    out = fruit.gw.chat("Q: What colour is a {fruit}?\nA:", model=llama_server.model, max_tokens=6,
                        params=GREEDY, gateway=gw, checkpoint=None)  # every row sent, none from a cache
    assert list(out["__status"]) == ["sent"] * 3
    assert out["__output_tokens"].between(1, 6).all()  # the issue saw 85-491 tokens and 500s


def test_a_bad_key_is_authentication_failed_and_the_key_is_not_in_the_message(llama_server: RunningServer
                                                                               ) -> None:
    with gwlab.connect(base_url=llama_server.base_url, api_key="sk-not-the-key") as client, \
            pytest.raises(errors.AuthenticationFailed) as caught:
        client.chat(PROMPT, model=llama_server.model, max_completion_tokens=2)
    assert caught.value.status == 401 and "sk-not-the-key" not in str(caught.value)


def test_an_unknown_model_is_served_anyway_because_llama_cpp_ignores_the_name(gw: gwlab.Gateway) -> None:
    """llama-cpp-python's server answers any model name with its one model: gwlab cannot know better, and the
    answer says which model really replied."""
    result = gw.chat(PROMPT, model="no-such-model", max_completion_tokens=2, **GREEDY)
    assert result.usage.output_tokens <= 2


@pytest.mark.parametrize("family", ["responses", "messages", "decisions"])
def test_a_family_the_server_lacks_is_a_404_that_says_the_route_is_missing(gw: gwlab.Gateway, family: str,
                                                                           llama_server: RunningServer) -> None:
    calls = {
        "responses": lambda: gw.responses.create(PROMPT, model=llama_server.model, max_output_tokens=4),
        "messages": lambda: gw.messages.create(PROMPT, model=llama_server.model, max_tokens=4),
        "decisions": lambda: gw.decide("I was charged twice.", {"refund": {
            "type": "noul", "instructions": "Is the customer asking for a refund?"}}, model=llama_server.model),
    }
    with pytest.raises(errors.NotFound) as caught:
        calls[family]()
    message = str(caught.value)
    assert "no such route on this gateway" in message and "check the model ID" not in message


def test_a_server_killed_mid_stream_is_an_interrupted_stream_never_a_complete_one(
        llama_server_to_kill: RunningServer) -> None:
    server = llama_server_to_kill
    with gwlab.connect(base_url=server.base_url, api_key=server.api_key) as client:
        stream = client.chat.stream(PROMPT, model=server.model, max_completion_tokens=400, **GREEDY)
        with pytest.raises(errors.StreamInterrupted) as caught:
            servers.kill_after_first_text(stream, server)
        row = client.ledger.entries()[-1]
    assert stream.status == "interrupted" and stream.ending == "interrupted" and not stream.complete
    assert caught.value.partial.text == stream.text and stream.text
    assert (row.streamed, row.complete, row.ending) == (True, False, "interrupted")


def test_the_openai_sdk_reports_the_same_kill_as_a_connection_error_without_the_partial_text(
        llama_server_to_kill: RunningServer) -> None:
    """Beside gwlab's StreamInterrupted, which carries `.partial`: the openai SDK raises APIConnectionError
    ("Connection error.") from its iterator, and the text so far lives only in what the caller accumulated
    (docs/guide/byo-gateway.md, "The official SDKs on the same servers")."""
    server = llama_server_to_kill
    sdk = openai.OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)
    stream = sdk.chat.completions.create(model=server.model, messages=[{"role": "user", "content": PROMPT}],
                                         max_tokens=400, temperature=0, stream=True)
    with pytest.raises(openai.APIConnectionError) as caught:
        servers.kill_after_first_text((_Texts(chunk) for chunk in stream), server)
    assert str(caught.value) == "Connection error." and not hasattr(caught.value, "partial")


class _Texts:
    """An openai chunk seen through gwlab's `.text`, so one helper drives both clients."""

    def __init__(self, chunk: Any) -> None:
        self.text = chunk.choices[0].delta.content if chunk.choices else ""


def test_the_openai_sdk_ends_a_stream_the_server_cut_short_without_any_error(llama_server: RunningServer) -> None:
    """The same cut that gwlab reports as StreamInterrupted (tests/byo/test_byo_endings.py): a second request
    makes llama.cpp end a running stream with [DONE] and no finish_reason. The openai SDK's iterator simply
    stops: the caller holds a partial answer that looks finished unless they check finish_reason themselves."""
    sdk = openai.OpenAI(base_url=llama_server.base_url, api_key=llama_server.api_key, max_retries=0)
    other = openai.OpenAI(base_url=llama_server.base_url, api_key=llama_server.api_key, max_retries=0)
    stream = sdk.chat.completions.create(model=llama_server.model, messages=[{"role": "user", "content": PROMPT}],
                                         max_tokens=400, temperature=0, stream=True)
    chunks = iter(stream)
    texts = [""]
    while not texts[-1]:  # the first chunk only names the role
        texts.append(_Texts(next(chunks)).text or "")
    other.chat.completions.create(model=llama_server.model, messages=[{"role": "user", "content": PROMPT}],
                                  max_tokens=2, temperature=0)  # waits for the model: the server cuts the stream
    rest = list(chunks)  # no exception
    finishes = [c.choices[0].finish_reason for c in rest if c.choices]
    assert all(reason is None for reason in finishes)  # nothing says "stop" or "length"
    assert len(texts) - 1 + len(rest) < 400  # cut well before its cap



def test_df_gw_extract_falls_back_to_the_prompt_on_llama_cpp_pythons_server_and_invents_nothing(
        gw: gwlab.Gateway, llama_server: RunningServer) -> None:
    # the server refuses response_format json_schema with a 500 naming it (a request validation error)
    assert_extract_falls_back_to_the_prompt(gw, llama_server.model)
