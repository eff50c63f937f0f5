"""Batch jobs through LiteLLM's proxy 1.108, a server gwlab did not write (docs/guide/batches.md, "Behind LiteLLM").

Offline, the proxy cannot run a batch itself: its own batch runner (for `hosted_vllm` models whose server has
no files API, e.g. llama-cpp-python's) keeps the input file in its database storage backend and refuses
("Storage backend litellm_db requires a database-connected proxy") without a PostgreSQL database and the
`prisma` client, which the byo install does not have. What it does serve offline is OpenAI's files + batches
passed through to an upstream that has them: here gwlab's embedded gateway, whose local model answers. The
proxy re-serialises every object (its own file and batch ids, its listing), so gwlab's client, its lost-submit
lookup and a `batch=` frame run are checked against LiteLLM's answers. It has no `/v1/messages/batches`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

import gwlab
from gwlab import BatchOptions
from gwlab.client.batches import BatchUnsupported
from tests.support import wait_until
from tests.support.models import TEXT_MODEL
from tests.support.servers import RunningServer

FAST = BatchOptions(poll=0.2, max_poll=1.0, timeout=240)
ENDPOINT = "/v1/chat/completions"


@pytest.fixture
def gw(litellm_proxy: RunningServer) -> Iterator[gwlab.Gateway]:
    with gwlab.connect(base_url=litellm_proxy.base_url, api_key=litellm_proxy.api_key) as client:
        yield client


def _body(question: str) -> dict:
    # the lines pass through untouched, so they name the upstream's model, not a proxy alias
    return {"model": TEXT_MODEL, "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": f"Q: {question}\nA:"}]}


def test_a_batch_through_the_proxy_is_answered_collected_and_found_by_its_token(gw: gwlab.Gateway) -> None:
    items = [("first", _body("2+2?")), ("second", _body("Capital of France?"))]
    job = gw.batches.submit(items, endpoint=ENDPOINT, metadata={"gwlab_submission": "byo-token"})
    assert job.metadata["gwlab_submission"] == "byo-token"
    done = wait_until(lambda: (j := gw.batches.retrieve(job.id)).terminal and j, timeout=240, interval=0.5,
                      what="the proxied batch ending")
    assert done.status == "completed" and (done.total, done.succeeded) == (2, 2)
    collation = gw.batches.results(done, ["first", "second"])
    assert collation.counts()["succeeded"] == 2 and not collation.missing and not collation.unknown
    for cid in ("first", "second"):
        answer = collation.results[cid].body
        assert answer["object"] == "chat.completion" and answer["usage"]["completion_tokens"] <= 4
    assert gw.batches.find("byo-token").id == job.id  # a lost submit is found through LiteLLM's listing


def test_a_batch_frame_run_through_the_proxy_gives_every_row_its_answer(gw: gwlab.Gateway, tmp_path) -> None:
    frame = pd.DataFrame({"q": ["Q: 2+2?\nA:", "Q: Capital of France?\nA:"]})
    out = frame.gw.chat("{q}", model=TEXT_MODEL, max_tokens=4, params={"temperature": 0}, gateway=gw, progress=False,
                        checkpoint=tmp_path / "c.sqlite", batch=FAST)
    assert out["__error"].isna().all(), out["__error"].tolist()
    assert out["text"].str.len().gt(0).all()
    assert out.run.batch["api"] == "openai" and out.run.batch["collected"] == 2 and out.run.input_tokens > 0
    assert list(gwlab.batches(tmp_path / "c.sqlite")["status"]) == ["completed"]


def test_message_batches_are_refused_before_anything_is_sent(gw: gwlab.Gateway) -> None:
    with pytest.raises(BatchUnsupported, match="no anthropic batch API; nothing was submitted"):
        gw.message_batches.create([("a", {"model": TEXT_MODEL, "max_tokens": 2,
                                          "messages": [{"role": "user", "content": "hi"}]})])
