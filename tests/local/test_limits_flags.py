"""`gwlab serve`'s limit flags (docs/security.md, Limits): each sets its field of `Limits`, `off` turns one
off, and a bad value is an error naming its flag before anything is served."""

from __future__ import annotations

import pytest

from gwlab import cli
from gwlab.errors import InvalidRequest
from gwlab.local.limits import FLAGS, Limits


def _limits(*flags: str) -> Limits:
    return cli._limits(cli._parser().parse_args(["serve", *flags]))


def test_every_limit_has_a_flag_and_the_flags_set_them() -> None:
    assert _limits() == Limits()
    chosen = _limits("--max-tools", "5", "--tokens-per-minute", "900", "--header-timeout-s", "2.5",
                     "--max-concurrency", "off")
    assert (chosen.max_tools, chosen.tokens_per_minute, chosen.header_timeout_s) == (5, 900, 2.5)
    assert chosen.max_concurrency is None
    every = _limits(*[part for flag in FLAGS.values() for part in (flag, "7")])
    assert all(getattr(every, name) == 7 for name in FLAGS)


@pytest.mark.parametrize(("flag", "value"), [("--max-tools", "0"), ("--body-timeout-s", "soon"),
                                             ("--realtime-buffer-bytes", "-1")])
def test_a_bad_limit_is_an_error_naming_its_flag(flag: str, value: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        _limits(flag, value)
    assert refused.value.field == flag


def test_gwlab_serve_refuses_a_bad_limit_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--max-request-tokens", "0"]) == 2
    assert "--max-request-tokens" in capsys.readouterr().err
