"""Row templates: columns by name, literal braces, JSON states, and rows that cannot be rendered."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from gwlab.errors import InvalidRequest
from gwlab.frames.templates import Template


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame({"ticket": ["printer on fire", "refund please", None],
                         "first name": ["Ada", "Bo", "Cy"], "price": [1.5, 2.25, np.nan],
                         "n": np.array([1, 2, 3], dtype=np.int64)})


def render(frame: pd.DataFrame, spec, **kw):
    return Template.parse(spec, frame.columns, field="state", **kw).render(frame)


def test_template_fills_columns_and_keeps_literal_braces(frame: pd.DataFrame) -> None:
    out = render(frame, "{{json}} {first name}: {ticket} ({n})")
    assert out.values[:2] == ["{json} Ada: printer on fire (1)", "{json} Bo: refund please (2)"]


def test_format_spec_applies_to_a_column(frame: pd.DataFrame) -> None:
    assert render(frame, "costs {price:.1f}").values[:2] == ["costs 1.5", "costs 2.2"]


def test_bare_column_name_is_the_column(frame: pd.DataFrame) -> None:
    assert render(frame, "ticket").values[:2] == ["printer on fire", "refund please"]


def test_unknown_column_is_named(frame: pd.DataFrame) -> None:
    with pytest.raises(InvalidRequest, match="'tikcet'") as caught:
        render(frame, "{tikcet}")
    assert caught.value.field == "state"


def test_text_that_is_no_column_and_no_template_is_refused(frame: pd.DataFrame) -> None:
    with pytest.raises(InvalidRequest, match="neither a column"):
        render(frame, "summarise this")
    assert render(frame, "You are terse.", literal_ok=True).values == ["You are terse."] * 3


def test_unbalanced_braces_are_refused(frame: pd.DataFrame) -> None:
    with pytest.raises(InvalidRequest, match="never closed"):
        render(frame, "{ticket")
    with pytest.raises(InvalidRequest, match="single '}'"):
        render(frame, "ticket}")


def test_missing_value_makes_a_row_error_not_the_text_nan(frame: pd.DataFrame) -> None:
    out = render(frame, "{ticket}")
    assert out.values[2] is None
    assert "no value in column 'ticket'" in out.errors[2]


def test_empty_text_is_a_row_error() -> None:
    out = render(pd.DataFrame({"t": ["ok", "   "]}), "{t}")
    assert out.values == ["ok", None] and "empty" in out.errors[1]


def test_python_backed_strings_render_without_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """A core install has no pyarrow (fault injected: importing it fails); pandas 3's Python-backed
    strings still have `__arrow_array__`, which must not send the blank check to pyarrow."""
    for name in ("pyarrow", "pyarrow.compute"):
        monkeypatch.setitem(sys.modules, name, None)
    out = render(pd.DataFrame({"t": pd.Series(["ok", "   ", None], dtype="string[python]")}), "{t}")
    assert out.values == ["ok", None, None] and "empty" in out.errors[1]


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_a_blank_value_inside_a_template_fails_its_row_as_a_missing_one_does(blank: str) -> None:
    """"Summarise: {email}" with no email used to be sent, and a summary invented for nothing."""
    frame = pd.DataFrame({"subject": ["hi", "hello"], "email": ["see attached", blank]})
    out = render(frame, "Summarise: {subject}\n{email}")
    assert out.values == ["Summarise: hi\nsee attached", None]
    assert "empty value in column 'email'" in out.errors[1] and "blank='send'" in out.errors[1]


def test_blank_send_sends_a_template_whose_value_is_blank_but_never_a_blank_text() -> None:
    frame = pd.DataFrame({"email": ["see attached", "  "]})
    template = Template.parse("Summarise: {email}", frame.columns, field="prompt")
    assert template.render(frame, blank="send").values == ["Summarise: see attached", "Summarise:   "]
    bare = Template.parse("{email}", frame.columns, field="prompt").render(frame, blank="send")
    assert bare.values == ["see attached", None] and "'email'" in bare.errors[1]


def test_an_unknown_blank_rule_is_refused_naming_the_option() -> None:
    frame = pd.DataFrame({"email": ["x"]})
    with pytest.raises(InvalidRequest, match="must be 'fail' or 'send'") as info:
        Template.parse("{email}", frame.columns, field="prompt").rows(frame, blank="skip")
    assert info.value.field == "blank"


def test_list_of_columns_is_a_json_object_state_with_nulls(frame: pd.DataFrame) -> None:
    out = render(frame, ["ticket", "price", "n"])
    assert out.values[0] == {"ticket": "printer on fire", "price": 1.5, "n": 1}
    assert out.values[2] == {"ticket": None, "price": None, "n": 3}
    assert isinstance(out.values[0]["n"], int) and not out.errors


def test_dict_of_columns_renames_the_keys(frame: pd.DataFrame) -> None:
    out = render(frame, {"customer": "first name", "message": "ticket"})
    assert out.values[1] == {"customer": "Bo", "message": "refund please"}
    with pytest.raises(InvalidRequest, match="'nope'"):
        render(frame, {"x": "nope"})


def test_identical_rows_share_one_code_numbered_by_first_appearance() -> None:
    frame = pd.DataFrame({"t": ["b", "a", "b", None, "a"], "k": [1, 2, 1, 3, 2]})
    rows = Template.parse("{t}", frame.columns, field="state").rows(frame)
    assert list(rows.codes) == [0, 1, 0, -1, 1] and [rows.value(j) for j in range(len(rows))] == ["b", "a"]
    json_rows = Template.parse(["t", "k"], frame.columns, field="state").rows(frame)
    assert list(json_rows.codes) == [0, 1, 0, 2, 1]
    assert json_rows.value(2) == {"t": None, "k": 3}


def test_prompt_and_system_rows_zip_into_pairs() -> None:
    frame = pd.DataFrame({"q": ["x", "x", "y"], "tone": ["terse", "warm", "terse"]})
    prompts = Template.parse("{q}", frame.columns, field="prompt").rows(frame)
    systems = Template.parse("Be {tone}.", frame.columns, field="system", literal_ok=True).rows(frame)
    pairs = prompts.zip(systems)
    assert list(pairs.codes) == [0, 1, 2]
    assert [pairs.value(j) for j in range(3)] == [("x", "Be terse."), ("x", "Be warm."), ("y", "Be terse.")]
    constant = prompts.zip(Template.parse("Be brief.", frame.columns, field="system", literal_ok=True).rows(frame))
    assert list(constant.codes) == [0, 0, 1]


def test_format_spec_that_does_not_fit_the_column_names_the_template_and_column(frame: pd.DataFrame) -> None:
    template = Template.parse("{ticket:.2f}", frame.columns, field="state")
    with pytest.raises(InvalidRequest, match=r"template '\{ticket:\.2f\}'.*':\.2f'.*column 'ticket'.*str") as caught:
        template.rows(frame)  # before any row is sent, not as a raw ValueError mid-run
    assert caught.value.field == "state"


def test_format_spec_that_fails_on_one_row_makes_that_row_an_error() -> None:
    mixed = pd.DataFrame({"x": [1.5, "n/a"]}, dtype=object)
    out = render(mixed, "value {x:.1f}")
    assert out.values == ["value 1.5", None]
    assert "does not apply to column 'x'" in out.errors[1]


def test_frame_without_columns_says_so_in_the_error() -> None:
    with pytest.raises(InvalidRequest, match=r"the frame has no columns$"):
        render(pd.DataFrame(), "{review}")
    with pytest.raises(InvalidRequest, match=r"the frame has no columns$"):
        render(pd.DataFrame(), "review")
