"""The %gw magics through a real IPython shell, on the session gateway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("IPython")

from gwlab import Gateway, magics
from gwlab.wire.families import FAMILIES
from tests.support.models import PROMPT

QUESTIONS_JSON = """{"urgent": {"type": "noul", "instructions": "Is this urgent?",
  "criteria": {"true": "needs action today", "false": "can wait"}}}"""
QUESTIONS_YAML = """
topic:
  type: choice
  instructions: What is the ticket about?
  criteria:
    billing: invoices, payments and refunds
    outage: the service is down or unreachable
"""


@pytest.fixture(scope="module")
def shell(gw: Gateway) -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gwlab")
    ip.user_ns["test_gw"] = gw
    ip.run_line_magic("gw", "connect test_gw")
    yield ip
    magics._Session.gateway = None  # the fixture's gateway is closed by its own fixture


def test_load_ext_registers_line_and_cell_magics(shell: Any) -> None:
    found = shell.magics_manager.lsmagic()
    assert "gw" in found["line"] and "gw" in found["cell"]


def test_connect_to_a_gateway_object_makes_it_the_session_gateway(shell: Any, gw: Gateway) -> None:
    assert magics.session_gateway() is gw


def test_chat_cell_streams_the_answer_and_ends_with_a_usage_line(shell: Any, capsys: Any) -> None:
    # a plain question: the gateway wraps it in its own Q/A prompt, and PROMPT's "A:" invites an empty answer
    shell.run_cell_magic("gw", "chat --max-tokens 16 -o answer", "What is the capital of France?")
    lines = capsys.readouterr().out.strip().splitlines()
    stream = shell.user_ns["answer"]
    assert stream.ending in ("complete", "capped") and stream.text.strip()  # sampled: it may run to the cap
    mark = "complete" if stream.ending == "complete" else "CAPPED (length)"
    assert lines[-1].startswith(f"[gw] chat · {FAMILIES['chat'].default_model} · ")  # the default text model
    assert f"{stream.usage.input_tokens} in / {stream.usage.output_tokens} out tokens · {mark}" in lines[-1]
    assert stream.text.strip() in "\n".join(lines[:-1])


@pytest.mark.parametrize("protocol", ["responses", "messages"])
def test_chat_cell_speaks_every_protocol(shell: Any, capsys: Any, protocol: str) -> None:
    shell.run_cell_magic("gw", f"chat --protocol {protocol} --max-tokens 4 -o answer", PROMPT)
    answer, last = shell.user_ns["answer"], capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"[gw] {protocol} · ")  # a base model may answer with a blank token
    if answer.ending == "capped":  # tests/widgets/test_capped_endings.py makes the cap certain
        assert last.endswith(" s") and " · CAPPED (" in last and not answer.complete
    else:
        assert answer.complete and "· complete ·" in last


def test_decide_cell_reads_json_questions_and_a_state_expression(shell: Any, capsys: Any) -> None:
    shell.user_ns["ticket"] = "The whole site is down and customers cannot pay!"
    result = shell.run_cell_magic("gw", "decide --state ticket -o verdict", QUESTIONS_JSON)
    assert result is shell.user_ns["verdict"]
    assert 0.0 <= result["urgent"].noul <= 1.0
    assert "[gw] decide · local/decide-e5-small · " in capsys.readouterr().out


def test_decide_cell_reads_yaml_questions(shell: Any) -> None:
    pytest.importorskip("yaml")
    result = shell.run_cell_magic("gw", "decide --state \"'I was charged twice this month'\"", QUESTIONS_YAML)
    assert result["topic"].choice in ("billing", "outage")
    assert set(result["topic"].probabilities) == {"billing", "outage"}


def test_an_invalid_question_is_one_line_naming_the_field(shell: Any, capsys: Any) -> None:
    bad = '{"urgent": {"type": "noul", "instructions": "Urgent?", "criteria": {"yes": "now"}}}'
    assert shell.run_cell_magic("gw", "decide --state ticket", bad) is None
    out = capsys.readouterr().out
    assert out.startswith("[gw] error: questions.urgent.criteria") and "Traceback" not in out


def test_a_body_neither_json_nor_a_mapping_is_refused(shell: Any, capsys: Any) -> None:
    shell.run_cell_magic("gw", "decide --state ticket", "[1, 2")
    assert capsys.readouterr().out.startswith("[gw] error: questions:")


def test_usage_and_models_lines(shell: Any) -> None:
    usage = shell.run_line_magic("gw", "usage")
    assert {"/chat/completions", "/decisions"} <= set(usage["path"])
    assert "local/gemma-3-270m" in shell.run_line_magic("gw", "models").ids


def test_bad_arguments_print_the_usage_instead_of_exiting(shell: Any, capsys: Any) -> None:
    shell.run_line_magic("gw", "chat --protocol carrier-pigeon")
    out = capsys.readouterr().out
    assert out.startswith("[gw] error:") and "usage: %gw" in out


def test_connect_with_a_missing_key_variable_says_where_keys_come_from(shell: Any, capsys: Any,
                                                                     gw: Gateway) -> None:
    shell.run_line_magic("gw", "connect --url http://127.0.0.1:9/v1 --key-env GWLAB_TEST_NO_SUCH_VAR")
    assert "GWLAB_TEST_NO_SUCH_VAR is not set" in capsys.readouterr().out
    assert magics.session_gateway() is gw  # unchanged


def test_connect_url_reads_the_key_from_the_environment(shell: Any, gateway: Any, gw: Gateway,
                                                        monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("GWLAB_TEST_KEY", gateway.api_key)
    shell.run_line_magic("gw", f"connect --url {gateway.base_url} --key-env GWLAB_TEST_KEY")
    made = magics.session_gateway()
    try:
        assert made is not gw and "local/gemma-3-270m" in shell.run_line_magic("gw", "models").ids
        assert gateway.api_key not in capsys.readouterr().out
    finally:
        shell.run_line_magic("gw", "connect test_gw")  # the one the magics made is closed here
    assert magics.session_gateway() is gw and made.loop.closed


@pytest.mark.parametrize(("line", "field"), [("decide --state undefined_var", "--state"),
                                             ("decide --state ticket --gateway no_such_gw", "--gateway"),
                                             ("decide --state 'unclosed", "%gw"),
                                             ("decide --state ticket --max-tokens 3", "%gw")])
def test_a_user_error_is_one_line_naming_the_option_without_a_traceback(shell: Any, capsys: Any, line: str,
                                                                          field: str) -> None:
    shell.user_ns["ticket"] = "The site is down"
    assert shell.run_cell_magic("gw", line, QUESTIONS_JSON) is None
    out = capsys.readouterr().out
    assert out.startswith(f"[gw] error: {field}: ") and out.count("\n") == 1 and "Traceback" not in out


def test_the_magics_use_the_gateway_the_user_connected(shell: Any, gateway: Any, gw: Gateway) -> None:
    import pandas as pd

    import gwlab

    user_gw = gwlab.connect(gateway.base_url, gateway.api_key)
    try:
        shell.run_line_magic("gw", "use")  # follow the connected gateway (the fixture had chosen test_gw)
        user_gw.models()
        shell.run_cell_magic("gw", "decide --state \"'The site is down'\"", QUESTIONS_JSON)
        pd.DataFrame({"text": ["I was charged twice"]}).gw.decide(
            "{text}", {"billing": {"type": "noul", "instructions": "Is this about billing?"}}, checkpoint=None)
        usage = shell.run_line_magic("gw", "usage")
        assert magics.session_gateway() is user_gw
        assert list(usage["path"]) == ["/models", "/decisions", "/decisions"]  # every call, one ledger
    finally:
        shell.run_line_magic("gw", "use test_gw")
        user_gw.close()
    assert magics.session_gateway() is gw


def test_the_gateway_option_sends_one_cell_elsewhere(shell: Any, gateway: Any, gw: Gateway) -> None:
    with Gateway(gateway.base_url, gateway.api_key) as other:
        shell.user_ns["other_gw"] = other
        assert "local/gemma-3-270m" in shell.run_line_magic("gw", "models --gateway other_gw").ids
        assert list(other.usage["path"]) == ["/models"] and magics.session_gateway() is gw
