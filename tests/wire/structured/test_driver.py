"""The one re-ask driver (wire/structured/driver.py), with a scripted sender: ask, validate, re-ask with the
error, and answer a refusal of the native form once in the prompt."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gwlab.errors import AnswerInvalid, BadRequest
from gwlab.wire.families import FAMILIES
from gwlab.wire.schema import Schema
from gwlab.wire.structured.driver import Asking, converse
from gwlab.wire.structured.forms import IN_PROMPT, RESPONSE_FORMAT, TOOL_INPUT

SCHEMA = Schema.of({"product": str, "order": int | None})
GOOD = json.dumps({"product": "kettle", "order": 42})
REFUSAL = BadRequest("Unrecognized request argument supplied: response_format", status=400)


class Script:
    """Answers each request with the next scripted text (an exception is raised instead)."""

    def __init__(self, *answers: Any) -> None:
        self.answers, self.sent = list(answers), []

    async def send(self, turns: list[Any], fields: dict[str, Any]) -> str:
        self.sent.append((turns, fields))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def run(asking: Asking, script: Script, messages: Any = "Ticket: my kettle broke, order 42") -> Any:
    return asyncio.run(converse(asking, messages, script.send, lambda text: (text, [])))


def test_each_text_family_row_holds_its_form_object() -> None:
    assert {name: FAMILIES[name].structured_output.name for name in ("chat", "responses", "messages")} == {
        "chat": "response_format", "responses": "text.format", "messages": "tools"}
    assert FAMILIES["decisions"].structured_output is None


def test_an_invalid_answer_is_asked_again_with_its_error_after_the_answer() -> None:
    script = Script('{"product": 1}', GOOD)
    done = run(Asking(SCHEMA, RESPONSE_FORMAT, max_reasks=1), script)
    assert done.parsed == {"product": "kettle", "order": 42} and done.asked == 1 and len(done.replies) == 2
    (first, fields), (again, _) = script.sent
    assert "response_format" in fields and "answer null" in first[-1]["content"]  # the absent rule, natively
    assert again[:-2] == first and again[-2] == {"role": "assistant", "content": '{"product": 1}'}
    assert "invalid" in again[-1]["content"] and "product" in again[-1]["content"]


def test_still_invalid_after_the_reasks_raises_with_every_reply_paid_for() -> None:
    script = Script("no", "still no", "nope")
    with pytest.raises(AnswerInvalid, match="not valid JSON") as info:
        run(Asking(SCHEMA, RESPONSE_FORMAT, max_reasks=2), script)
    assert info.value.replies == ["no", "still no", "nope"] and info.value.asked == 2 and info.value.reply == "nope"


def test_a_refusal_of_the_native_form_is_asked_once_more_in_the_prompt_and_reported() -> None:
    heard: list[BaseException] = []
    script = Script(REFUSAL, GOOD)
    done = run(Asking(SCHEMA, RESPONSE_FORMAT, 1, on_refused=lambda e: heard.append(e) or True), script)
    assert heard == [REFUSAL] and done.form is IN_PROMPT and done.replies == [GOOD]  # the refused ask never ran
    turns, fields = script.sent[1]
    assert fields == {} and "JSON Schema" in turns[-1]["content"]


def test_a_refusal_is_raised_when_nobody_takes_it_or_the_taker_declines() -> None:
    with pytest.raises(BadRequest):
        run(Asking(SCHEMA, RESPONSE_FORMAT, 1), Script(REFUSAL))
    with pytest.raises(BadRequest):
        run(Asking(SCHEMA, RESPONSE_FORMAT, 1, on_refused=lambda e: False), Script(REFUSAL))


def test_the_tool_form_reads_the_forced_tools_input_and_names_its_fields_in_a_refusal() -> None:
    calls = [{"name": "other", "arguments": {}},
             {"name": SCHEMA.name, "arguments": {"product": "kettle", "order": None}}]
    assert json.loads(TOOL_INPUT.answer_text(SCHEMA, "prose", calls)) == {"product": "kettle", "order": None}
    assert TOOL_INPUT.refused(BadRequest("tool_choice is not supported", status=400))
    assert not TOOL_INPUT.refused(BadRequest("model not found", status=400))
    assert not IN_PROMPT.refused(REFUSAL)
