"""A client's settings are one frozen object, built and checked once, and read by every layer below."""

from __future__ import annotations

import dataclasses

import pytest

from gwlab import ClientConfig, Gateway, InvalidRequest, connect

URL, KEY = "http://127.0.0.1:9/v1", "sk-test-config"


def test_gateway_keywords_become_one_config_that_the_transport_reads() -> None:
    with Gateway(URL, KEY, timeout=5.0, max_retries=0, headers={"x-team": "eval"}) as gw:
        assert gw.config is gw.twin.config
        assert (gw.config.timeout, gw.config.max_retries) == (5.0, 0)
        assert gw.twin.transport.retry.max_retries == 0
        assert gw.twin.transport._client.headers["x-team"] == "eval"


def test_a_config_is_frozen_and_options_apply_over_it() -> None:
    base = ClientConfig(deadline=30.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.deadline = 1.0  # type: ignore[misc]
    with Gateway(URL, KEY, config=base, max_retries=1) as gw:
        assert (gw.config.deadline, gw.config.max_retries) == (30.0, 1)


@pytest.mark.parametrize(("options", "field"), [({"messages_auth": "cookie"}, "messages_auth"),
                                                 ({"max_retries": -1}, "max_retries"),
                                                 ({"timeout": 0}, "timeout"),
                                                 ({"deadline": "soon"}, "deadline")])
def test_a_bad_setting_is_refused_naming_it_before_anything_starts(options, field) -> None:
    with pytest.raises(InvalidRequest) as refused:
        connect(URL, KEY, **options)
    assert refused.value.field == field


def test_an_unknown_setting_is_refused_naming_it_and_the_known_ones() -> None:
    with pytest.raises(TypeError, match=r"timout \(known: .*timeout"):
        Gateway(URL, KEY, timout=3)  # type: ignore[call-arg]


def test_the_key_is_in_no_config_and_no_repr() -> None:
    with Gateway(URL, KEY) as gw:
        assert KEY not in repr(gw.config) and KEY not in repr(gw)
        assert all(KEY not in repr(getattr(gw.config, f.name)) for f in dataclasses.fields(gw.config))
