"""`connect()`: the user's gateway, hosted when configured, else the embedded local one on loopback.

Above the client layer on purpose: the client speaks to any gateway and never imports the local server;
only this module knows that an unconfigured `connect()` starts one (`gwlab.local.shared()`). It also
keeps the process's current gateway, which the magics, the consoles and `df.gw` use when not given one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Mapping
from typing import Unpack

from gwlab.client.config import ClientConfig, ClientOptions
from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.errors import ConnectionFailed, InvalidRequest, Timeout
from gwlab.wire import limits
from gwlab.wire.families import FAMILIES

__all__ = ["ENV_API_KEY", "ENV_BASE_URL", "connect", "current_gateway"]

ENV_BASE_URL = "GWLAB_BASE_URL"
ENV_API_KEY = "GWLAB_API_KEY"
log = logging.getLogger("gwlab")


def connect(base_url: str | None = None, api_key: str | None = None, *, env: Mapping[str, str] | None = None,
            config: ClientConfig | None = None, check: bool = True, **options: Unpack[ClientOptions]) -> Gateway:
    """A gateway client: the hosted gateway when configured, else the embedded local one.

    Parameters
    ----------
    base_url, api_key : the gateway; default to `GWLAB_BASE_URL` and `GWLAB_API_KEY` in `env`.
        With neither set anywhere, the process's one embedded local gateway is used, started on
        loopback the first time (one line is printed then; the key it issues stays private). A
        second `connect()` reuses it; it stops when the last gateway using it closes, or at exit.
    env : where to read the variables; default `os.environ` (tests pass a dict). Not a default
        argument value: a signature holding os.environ would show every variable, key included,
        in `help(connect)` and Jupyter's `connect?`.
    config : a `ClientConfig` to start from; the settings below are applied over it.
    check : ask a configured address once (`GET /models` without the key, no retry, within
        `limits.CONNECT_CHECK_SECONDS`, not in the ledger) before it becomes the current gateway. No answer
        at all (refused, unknown host, timed out) raises `ConnectionFailed` naming the URL, and the current
        gateway stays what it was; any HTTP answer counts (a wrong key's 401 is the first call's to raise).
        `check=False` skips the request. The embedded gateway is not asked: connect() has just started it.
    timeout, deadline, max_retries, ledger_path, http_transport, dialect : the client's settings, these and
        the others of `ClientConfig` (as for `Gateway`);
        `dialect={"decisions_path": "/systemone"}` is the one place to say how a gateway differs from
        the spec (docs/guide/byo-gateway.md). `http_transport="httpx"` (or "fast") overrides the
        transport chosen by address and proxy settings; the embedded gateway is reached over the fast
        path unless told otherwise, since it is this process's own server on loopback.

    Returns
    -------
    Gateway
        Also the process's current gateway (`current_gateway()`), which the magics, the widgets and
        `df.gw` use when not given one.

    Examples
    --------
    >>> gw = gwlab.connect()                    # doctest: +SKIP
    >>> gw.models()                             # doctest: +SKIP
    """
    env = os.environ if env is None else env
    config = ClientConfig.of(config, **options)  # built and checked once, before anything starts
    base_url = base_url or env.get(ENV_BASE_URL) or None
    api_key = api_key or env.get(ENV_API_KEY) or None
    if base_url and api_key:
        gateway = Gateway(base_url, api_key, config=config)
        if check:
            _check_reachable(gateway)
        return _made_current(gateway)
    if base_url:
        raise InvalidRequest("api_key", f"an address is set but no key: pass api_key= or set {ENV_API_KEY}")
    if api_key:
        raise InvalidRequest("base_url", f"a key is set but no address: pass base_url= or set {ENV_BASE_URL}")
    from gwlab import local  # the server's dependencies load only when it is wanted

    lease = local.shared()  # one embedded gateway per process, however often connect() is called
    if lease.started:
        message = f"gwlab: started the embedded local gateway at {lease.base_url}"
        log.info(message)
        print(message)
    else:
        log.info("gwlab: using the embedded local gateway already running at %s", lease.base_url)
    # our own server on loopback: reached directly even when HTTP_PROXY leaves loopback uncovered
    if config.http_transport is None:
        config = ClientConfig.of(config, http_transport="fast")
    try:
        gateway = Gateway(lease.base_url, lease.api_key, config=config)
    except BaseException:
        lease.stop()
        raise
    gateway.own(lease)  # closing the gateway lets go of its lease, never of another's
    return _made_current(gateway)


def _check_reachable(gateway: Gateway) -> None:
    """Close `gateway` and raise ConnectionFailed naming its URL when its address does not answer."""
    try:
        gateway.loop.run(_ask(gateway.twin))
    except ConnectionFailed as exc:
        gateway.close()
        raise ConnectionFailed(f"no answer from the gateway at {gateway.base_url} ({exc}); it did not become "
                               f"the current gateway (check the address, or pass check=False)") from None


async def _ask(twin: AsyncGateway) -> None:
    try:
        async with asyncio.timeout(limits.CONNECT_CHECK_SECONDS):
            await twin.transport.check_answers(FAMILIES["models"].path)
    except TimeoutError:
        raise Timeout(f"no answer within {limits.CONNECT_CHECK_SECONDS} s") from None


class _Current:
    """The gateway `connect()` returned last in this process (held, so a cell's rebinding keeps it)."""

    gateway: Gateway | None = None
    lock = threading.Lock()


def _made_current(gateway: Gateway) -> Gateway:
    with _Current.lock:
        _Current.gateway = gateway
    return gateway


def current_gateway(*, connect_if_none: bool = True) -> Gateway | None:
    """The gateway the user connected: what `connect()` returned last, while it is open.

    The `%gw` magics, the consoles built without a gateway and `df.gw` without `gateway=` all use it,
    so their calls reach the user's gateway and land in its `gw.usage`. With none open, `connect()`
    is called once (or None is returned when `connect_if_none` is false).
    """
    with _Current.lock:
        gateway = _Current.gateway
        if gateway is not None and not gateway.loop.closed:
            return gateway
    return connect() if connect_if_none else None
