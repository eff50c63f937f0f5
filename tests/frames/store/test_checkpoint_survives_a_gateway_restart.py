"""A checkpoint keys the embedded gateway's answers by its identity, not by its URL.

The embedded gateway gets a new port per kernel, so a re-run headless notebook asked every row again. It
now sends a stable identity ("local:" + a digest of its models, engine versions and code) with every
answer, and a run with a checkpoint keys by that: a new gateway on a new port serves the saved answers.
A hosted gateway (not on loopback) is never asked and keeps its URL key, as before; two local model sets
have two identities.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gwlab import Gateway
from tests.support.gateways import RequestLog, start_gateway, stop_gateway
from tests.support.tickets import DECISIONS, QUESTIONS

TICKETS = pd.DataFrame({"ticket": ["I was charged twice", "The app crashes on start", "Please add dark mode"]})


def decide(base_url: str, api_key: str, checkpoint: Path) -> pd.DataFrame:
    with Gateway(base_url, api_key) as gw:
        return TICKETS.gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=checkpoint, progress=False)


def test_a_new_embedded_gateway_on_a_new_port_serves_the_checkpointed_answers(tmp_path: Path) -> None:
    checkpoint = tmp_path / "answers.sqlite"
    first = start_gateway(tmp_path / "first.sqlite")
    try:
        before = decide(first.base_url, first.api_key, checkpoint)
    finally:
        stop_gateway(first)
    assert before.run.sent == 3
    second = start_gateway(tmp_path / "second.sqlite")
    try:
        assert second.base_url != first.base_url
        mark = RequestLog(second.db).mark()
        after = decide(second.base_url, second.api_key, checkpoint)
        assert RequestLog(second.db).settled(mark, DECISIONS) == []  # zero requests sent
    finally:
        stop_gateway(second)
    assert (after.run.sent, after.run.cached) == (0, 3)
    answers = [c for c in before.columns if c.startswith(tuple(QUESTIONS))]
    pd.testing.assert_frame_equal(after[answers], before[answers])
    assert after.run.gateway == before.run.gateway and after.run.gateway.startswith("local:")


def test_another_local_model_set_is_another_identity(monkeypatch) -> None:
    from gwlab.local import catalog

    served = catalog.gateway_identity()
    extra = catalog.ModelInfo("me/tiny", "tiny (GGUF: tiny.gguf)", "a user's GGUF", catalog.TEXT_FAMILIES)
    monkeypatch.setitem(catalog._user, extra.id, extra)
    monkeypatch.setitem(catalog._user_files, extra.id, ("tiny.gguf", 1234))
    assert catalog.gateway_identity() != served and catalog.gateway_identity().startswith("local:")
    monkeypatch.setitem(catalog._user_files, extra.id, ("tiny.gguf", 4321))  # another file under the same id
    monkeypatch.setattr(catalog, "_identity", {})
    assert catalog.gateway_identity() != served


def test_a_client_only_wire_module_leaves_the_identity_and_any_other_changes_it(tmp_path, monkeypatch) -> None:
    from gwlab.local import catalog

    monkeypatch.setattr(catalog, "__file__", str(tmp_path / "local" / "catalog.py"))
    for name in ("local/engine.py", "wire/schema.py", *catalog._CLIENT_ONLY):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    served = catalog._code_digest()
    for name in catalog._CLIENT_ONLY:
        (tmp_path / name).write_text("x = 2  # an aligner fix\n")
    assert catalog._code_digest() == served
    (tmp_path / "wire/schema.py").write_text("x = 2\n")
    assert catalog._code_digest() != served


def test_the_local_gateway_never_imports_a_client_only_module() -> None:
    import ast

    from gwlab.local import catalog

    client_only = {"gwlab." + name.removesuffix(".py").replace("/", ".") for name in catalog._CLIENT_ONLY}
    for path in Path(catalog.__file__).resolve().parent.rglob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = "gwlab." * (node.level > 0) + (node.module or "")
                imported |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
        assert not {m.replace("..", ".") for m in imported} & client_only, path
