"""`connect()`: the hosted gateway from the environment, else the embedded local one, quietly."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

import gwlab
from gwlab import errors
from tests.support import free_port
from tests.support.fakes import CANARY_KEY, FakeLocal


def test_connect_reads_the_environment_mapping():
    gw = gwlab.connect(env={"GWLAB_BASE_URL": "http://gw.example:8000", "GWLAB_API_KEY": CANARY_KEY}, check=False)
    try:
        assert gw.base_url == "http://gw.example:8000/v1" and CANARY_KEY not in repr(gw)
    finally:
        gw.close()


def test_arguments_win_over_the_environment():
    env = {"GWLAB_BASE_URL": "http://env:2", "GWLAB_API_KEY": "k"}
    gw = gwlab.connect("http://arg:1", CANARY_KEY, env=env, check=False)
    try:
        assert gw.base_url == "http://arg:1/v1"
    finally:
        gw.close()


@pytest.mark.parametrize(("env", "field_name"), [({"GWLAB_BASE_URL": "http://x"}, "api_key"),
                                                 ({"GWLAB_API_KEY": "k"}, "base_url")])
def test_half_a_configuration_is_refused_naming_what_is_missing(env, field_name):
    with pytest.raises(errors.InvalidRequest) as info:
        gwlab.connect(env=env)
    assert info.value.field == field_name


def test_without_configuration_the_embedded_gateway_starts_and_is_announced_once(monkeypatch, capsys, caplog):
    import gwlab.local

    local = FakeLocal()
    monkeypatch.setattr(gwlab.local, "start", lambda *a, **k: local)
    caplog.set_level(logging.INFO, logger="gwlab")
    gw = gwlab.connect(env={})
    out = capsys.readouterr().out
    assert out == "gwlab: started the embedded local gateway at http://127.0.0.1:9/v1\n"
    assert [r.getMessage() for r in caplog.records if r.name == "gwlab"] == [out.strip()]
    assert gw.base_url == local.base_url and "local" in repr(gw) and CANARY_KEY not in repr(gw)
    gw.close()
    gw.close()
    assert local.stopped == 1


def test_connect_twice_starts_one_embedded_gateway_which_stops_with_its_last_user(monkeypatch, capsys):
    import gwlab.local

    started: list[FakeLocal] = []
    monkeypatch.setattr(gwlab.local, "start", lambda *a, **k: started.append(FakeLocal()) or started[-1])
    first, second = gwlab.connect(env={}), gwlab.connect(env={})
    assert len(started) == 1 and first is not second and first.base_url == second.base_url
    assert capsys.readouterr().out.count("started the embedded local gateway") == 1
    first.close()
    assert started[0].stopped == 0  # closing one gateway never stops a server another one uses
    second.close()
    assert started[0].stopped == 1
    third = gwlab.connect(env={})  # after the last one closed, a new server starts
    third.close()
    assert len(started) == 2 and started[1].stopped == 1


def test_the_gateway_connect_returned_last_is_the_current_one_while_open():
    from gwlab.connection import current_gateway

    env = {"GWLAB_BASE_URL": "http://gw.example:8000", "GWLAB_API_KEY": CANARY_KEY}
    first, second = gwlab.connect(env=env, check=False), gwlab.connect(env=env, check=False)
    try:
        assert current_gateway(connect_if_none=False) is second
    finally:
        first.close()
        second.close()
    assert current_gateway(connect_if_none=False) is None


def test_two_connects_share_the_real_embedded_gateway_and_outlive_each_other(monkeypatch):
    for name in ("GWLAB_BASE_URL", "GWLAB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    first = gwlab.connect()
    second = gwlab.connect()
    try:
        assert first.base_url == second.base_url
        first.close()
        assert "local/decide-e5-small" in second.models()  # the server outlived the first client
    finally:
        first.close()
        second.close()
    with gwlab.Gateway(second.base_url, CANARY_KEY, max_retries=0) as late, pytest.raises(errors.ConnectionFailed):
        late.models()  # the last client closed: so did the server


def test_either_face_of_a_gateway_stops_what_it_owns_once_when_it_closes():
    import asyncio

    owned_sync, owned_async = FakeLocal(), FakeLocal()
    gw = gwlab.Gateway("http://gw.example/v1", CANARY_KEY)
    gw.own(owned_sync)
    gw.close()
    gw.close()

    async def main() -> None:
        agw = gwlab.AsyncGateway("http://gw.example/v1", CANARY_KEY)
        agw.own(owned_async)
        assert owned_async.stopped == 0
        await agw.aclose()
        await agw.aclose()

    asyncio.run(main())
    assert (owned_sync.stopped, owned_async.stopped) == (1, 1)


def test_a_connect_to_a_dead_address_fails_naming_the_url_and_never_becomes_current(gateway):
    from gwlab.connection import current_gateway

    working = gwlab.connect(gateway.base_url, gateway.api_key)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    try:
        with pytest.raises(errors.ConnectionFailed, match=rf"no answer from the gateway at {dead}/v1") as info:
            gwlab.connect(dead, CANARY_KEY)
        assert CANARY_KEY not in str(info.value)
        assert current_gateway(connect_if_none=False) is working
        question = {"type": "noul", "instructions": "Is it urgent?", "criteria": {"true": "now", "false": "later"}}
        answers = pd.DataFrame({"text": ["The site is down."]}).gw.decide("{text}", {"urgent": question})
        assert answers["urgent__noul"].notna().all()  # df.gw still reaches the gateway that works
    finally:
        working.close()


def test_a_reachable_gateway_that_refuses_the_key_still_connects_and_the_first_call_says_why(gateway):
    with gwlab.connect(gateway.base_url, "sk-not-the-key") as gw, pytest.raises(errors.AuthenticationFailed):
        gw.models()
