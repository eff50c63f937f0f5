"""Issue 13 item 2 against the real llama-cpp-python server: a second request ends a running stream with
`[DONE]` and no finish_reason, and gwlab reports that stream interrupted, never complete.

The server's `interrupt_requests` (on by default) makes a streaming generation check, after each chunk
it sends, whether another request is waiting for the model (its outer lock is held); if so it sends
`[DONE]` and stops. The test reads the first text of a greedy 400-token stream (this prompt loops, so
it always runs to its cap: about 6 s of generation), then sends a second request from another client.
That request waits for the model, so the server cuts the first stream at its next chunk: the order of
events is fixed by the server's lock, not by timing. The second request then gets its answer.
"""

from __future__ import annotations

import pytest

import gwlab
from gwlab import errors
from tests.support.servers import RunningServer

PROMPT = "Q: What colour is a banana?\nA:"  # greedy Gemma echoes it over and over: it runs to its cap


def test_a_second_request_cuts_a_running_stream_which_is_interrupted_not_complete(
        llama_server: RunningServer) -> None:
    with gwlab.connect(base_url=llama_server.base_url, api_key=llama_server.api_key) as first, \
            gwlab.connect(base_url=llama_server.base_url, api_key=llama_server.api_key) as second:
        stream = first.chat.stream(PROMPT, model=llama_server.model, max_completion_tokens=400, temperature=0)
        events = iter(stream)
        while not stream.text:  # the first chunk only names the role
            next(events)
        other = second.chat(PROMPT, model=llama_server.model, max_completion_tokens=2, temperature=0)
        with pytest.raises(errors.StreamInterrupted, match="end reason") as caught:
            for _ in events:
                pass
        [row] = first.ledger.entries()
    assert other.ending == "capped"  # the second request was served once the first let go of the model
    assert (stream.status, stream.ending, stream.complete) == ("interrupted", "interrupted", False)
    assert stream.result.finish_reason is None and caught.value.partial.text == stream.text
    assert stream.usage is None or stream.usage.output_tokens < 400  # cut well before its cap
    assert (row.streamed, row.ending, row.complete, row.error) == (True, "interrupted", False, "StreamInterrupted")
