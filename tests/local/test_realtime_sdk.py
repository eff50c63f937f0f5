"""The official openai SDK against the local realtime gateway: sessions.create and connect()."""

from __future__ import annotations

from typing import Any

import openai

from tests.support.realtime import MODEL


def sdk(gateway: Any, key: str | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=key or gateway.api_key, base_url=gateway.base_url,
                              websocket_base_url=gateway.base_url.replace("http://", "ws://"), max_retries=0)


async def test_official_sdk_completes_a_text_turn(gateway) -> None:
    client = sdk(gateway)
    async with client.beta.realtime.connect(model=MODEL) as connection:
        await connection.session.update(session={"modalities": ["text"], "instructions": "Answer briefly."})
        await connection.conversation.item.create(item={
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is 2 + 2?"}]})
        await connection.response.create()
        text, kinds = [], []
        async for event in connection:
            kinds.append(event.type)
            if event.type == "response.text.delta":
                text.append(event.delta)
            elif event.type == "response.done":
                done = event.response
                break
    assert kinds[0] == "session.created" and "session.updated" in kinds and "error" not in kinds
    assert done.status == "completed" and done.usage is not None and done.usage.output_tokens > 0
    assert done.output[0].content[0].text == "".join(text) != ""


async def test_official_sdk_ephemeral_token_connects_once(gateway) -> None:
    session = await sdk(gateway).beta.realtime.sessions.create(model=MODEL, voice="echo")
    token = session.client_secret.value
    assert token.startswith("ek_") and session.voice == "echo"
    async with sdk(gateway, token).beta.realtime.connect(model=MODEL) as connection:
        first = await connection.recv()
        assert first.type == "session.created" and first.session.voice == "echo"
    try:
        async with sdk(gateway, token).beta.realtime.connect(model=MODEL) as connection:
            await connection.recv()
    except Exception as exc:  # the SDK surfaces the refused handshake as the websockets error
        assert "401" in str(exc)
    else:
        raise AssertionError("a spent ephemeral token opened a second connection")
