"""The protocol-family table is the one place a family's facts live, and every consumer reads it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gwlab.client.transport.core import AsyncTransport
from gwlab.errors import InvalidRequest
from gwlab.frames.recipes import TEXT_RECIPES
from gwlab.frames.run.usage import charges_output
from gwlab.local import catalog
from gwlab.local.app import ROUTERS
from gwlab.local.errors import vendor_of
from gwlab.wire.families import FAMILIES, TEXT, by_path, family, read_usage
from gwlab.wire.jobs.batches import ANTHROPIC_BATCHES
from gwlab.wire.limits import API_PREFIX
from gwlab.wire.models import DEFAULT_MODELS, default_model

PACKAGE = Path(__file__).resolve().parents[2] / "gwlab"
ROWS = list(FAMILIES.values())


def _routes() -> set[tuple[str, str]]:
    """(method, path) of every route the local gateway mounts, relative to the API prefix."""
    out = set()
    for router in ROUTERS:
        for route in router.routes:
            methods = getattr(route, "methods", None) or {"GET"}  # a WebSocket route: its handshake is a GET
            out |= {(method, route.path) for method in methods}
    return out


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_every_family_is_served_by_the_local_gateway_at_its_path(row) -> None:
    assert (row.method, row.path) in _routes()


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_every_family_has_its_client_on_the_gateway(row) -> None:
    from gwlab.client.gateway import AsyncGateway, Gateway

    for face in (AsyncGateway, Gateway):
        gateway = face("http://127.0.0.1:9/v1", "sk-test")
        try:
            assert getattr(gateway, row.client) is not None
        finally:
            if face is Gateway:
                gateway.close()


@pytest.mark.parametrize("row", [r for r in ROWS if r.frame_method], ids=lambda row: row.name)
def test_every_family_with_a_frame_method_is_a_df_gw_method_with_a_recipe(row) -> None:
    import pandas as pd

    import gwlab  # noqa: F401  (registers df.gw)

    accessor = pd.DataFrame({"x": ["a"]}).gw
    assert callable(getattr(accessor, row.frame_method))
    assert callable(getattr(accessor, "a" + row.frame_method))
    assert row.name in TEXT_RECIPES or row.name == "decisions"


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_a_path_of_a_family_is_read_back_as_that_family_by_every_layer(row) -> None:
    assert by_path(row.path) is row and by_path(row.route) is row
    assert by_path(row.route + "/sub") is row
    assert vendor_of(row.route) == row.vendor  # the local gateway's error shape and request-id header
    assert charges_output(row.path) is row.charges_output  # the usage frame's billing


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_the_transport_resends_a_lost_post_only_where_the_row_says_so(row) -> None:
    transport = AsyncTransport("http://127.0.0.1:9/v1", "sk-test")
    assert transport.is_idempotent("POST", row.name, None) is row.idempotent


def test_the_text_families_are_the_ones_every_text_consumer_offers() -> None:
    from gwlab import magics
    from gwlab.widgets.stream_console import PROTOCOLS

    assert set(TEXT) == set(TEXT_RECIPES) == set(PROTOCOLS) == {"chat", "responses", "messages"}
    assert set(catalog.TEXT_FAMILIES) == set(TEXT)
    args = magics._parser().parse_args(["chat", "--protocol", TEXT[-1]])
    assert args.protocol == TEXT[-1]
    with pytest.raises(Exception, match="invalid choice"):
        magics._parser().parse_args(["chat", "--protocol", "decisions"])
    assert all(FAMILIES[name].token_cap for name in TEXT)


def test_every_default_model_ability_is_in_default_models() -> None:
    assert {row.ability for row in ROWS if row.ability} <= set(DEFAULT_MODELS)
    assert FAMILIES["chat"].default_model == DEFAULT_MODELS["text"]


def test_a_family_without_an_ability_has_no_default_model_and_says_the_model_is_required() -> None:
    assert default_model("m", None) == "m" and default_model(None, "text") == DEFAULT_MODELS["text"]
    with pytest.raises(InvalidRequest) as raised:
        default_model(None, None)
    assert raised.value.field == "model"


def test_an_unknown_family_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: models, chat"):
        family("chats")


def test_usage_is_read_under_either_protocols_names_and_only_as_integers() -> None:
    assert read_usage({"input_tokens": 3, "output_tokens": 4}) == (3, 4)
    assert read_usage({"prompt_tokens": 3, "completion_tokens": 4}) == (3, 4)
    assert read_usage({"input_tokens": True, "output_tokens": "4"}) == (None, None)
    assert read_usage(None) == (None, None)


def _string_constants(path: Path) -> list[str]:
    """Every string literal of a module except docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_a_family_path_is_written_only_in_the_table_and_its_route(row) -> None:
    batch_api = (ANTHROPIC_BATCHES.create_path, API_PREFIX + ANTHROPIC_BATCHES.create_path)
    def names_path(text: str) -> bool:
        if text.startswith(batch_api):  # message batches: their own API (wire/jobs/batches.py)
            return False
        return any(text == head or text.startswith(head + "/") or text.startswith(head + "?")
                   for head in (row.path, row.route))

    writers = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                     if any(names_path(text) for text in _string_constants(path)))
    allowed = {"wire/families.py", f"local/routes/{row.client}.py"}
    assert set(writers) <= allowed, f"{row.path} is written outside its row and route: {writers}"
