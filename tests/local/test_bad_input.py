"""Untrusted bodies on every POST endpoint: always a 4xx that names the field, never a 5xx, never a hang."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import zstandard

from tests.support.gateways import RunningGateway, start_gateway, stop_gateway

DECIDE, TEXT, REALTIME = "local/decide-e5-small", "local/gemma-3-270m", "local/realtime-gemma-3-270m"
SYSTEM_ONE = {"model": DECIDE, "state": "my card was charged twice",
              "questions": {"billing": {"type": "noul", "instructions": "Is this about billing?"}}}
HELLO = {"role": "user", "content": "hi"}
TIMEOUT = httpx.Timeout(30)  # a hang fails the test instead of stalling the suite


@dataclass(frozen=True)
class Post:
    name: str
    path: str
    valid: dict[str, Any]  # a body that passes validation (never sent whole: only mutated)
    wrong_type: tuple[dict[str, Any], str]  # (body with one mistyped field, that field)
    headers: dict[str, str] = field(default_factory=dict)
    family: str = "openai"


POSTS = [
    Post("chat", "/chat/completions", {"model": TEXT, "messages": [HELLO]},
         ({"model": TEXT, "messages": "hi"}, "messages")),
    Post("responses", "/responses", {"model": TEXT, "input": "hi"},
         ({"model": TEXT, "input": 5}, "input")),
    Post("messages", "/messages",
         {"model": TEXT, "max_tokens": 5, "messages": [HELLO]},
         ({"model": TEXT, "max_tokens": "five", "messages": [HELLO]}, "max_tokens"),
         {"anthropic-version": "2023-06-01"}, "anthropic"),
    Post("decisions", "/decisions", SYSTEM_ONE,
         ({**SYSTEM_ONE, "questions": "billing"}, "questions")),
    Post("systemone", "/systemone", SYSTEM_ONE, ({**SYSTEM_ONE, "state": 5}, "state"),
         family="typesafe"),
    Post("embeddings", "/embeddings", {"model": DECIDE, "input": "hi"},
         ({"model": DECIDE, "input": "hi", "encoding_format": 5}, "encoding_format")),
    Post("videos", "/videos", {"prompt": "x"}, ({"prompt": ["x"]}, "prompt")),
    Post("videos.remix", "/videos/video_missing/remix", {"prompt": "x"}, ({"prompt": 5}, "prompt")),
    Post("images", "/images/tasks", {"prompt": "x"}, ({"prompt": ["x"]}, "prompt")),
    Post("realtime.sessions", "/realtime/sessions", {"model": REALTIME},
         ({"model": REALTIME, "voice": 5}, "voice")),
]
ids = [p.name for p in POSTS]


def _send(gateway: RunningGateway, post: Post, content: bytes, content_type: str | None = "application/json",
          **headers: str) -> httpx.Response:
    all_headers = {"Authorization": f"Bearer {gateway.api_key}", **post.headers, **headers}
    if content_type:
        all_headers["Content-Type"] = content_type
    r = httpx.post(f"{gateway.base_url}{post.path}", content=content, headers=all_headers, timeout=TIMEOUT)
    assert r.status_code < 500, f"{post.name}: {r.status_code} {r.text[:300]}"
    return r


def _named(r: httpx.Response, post: Post) -> str:
    """Where the error names its field: `param` when the shape has one, and the message."""
    body = r.json()
    if post.family == "anthropic":
        return body["error"]["message"]
    if post.family == "typesafe":
        return f"{body['detail'].get('param')} {body['detail']['message']}"
    return f"{body['error']['param']} {body['error']['message']}"


def _dumps(body: Any) -> bytes:
    return json.dumps(body).encode()


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_invalid_json_is_400_naming_the_body(gateway: RunningGateway, post: Post) -> None:
    r = _send(gateway, post, b'{"model": "x",')
    assert r.status_code == 400 and "JSON" in _named(r, post)


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_invalid_utf8_is_400(gateway: RunningGateway, post: Post) -> None:
    r = _send(gateway, post, b'{"model": "\xff\xfe"}')
    assert r.status_code == 400


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_wrong_content_type_is_415_naming_content_type(gateway: RunningGateway, post: Post,
                                                       content_type: str | None) -> None:
    r = _send(gateway, post, _dumps(post.valid), content_type)
    assert r.status_code == 415 and "Content-Type" in _named(r, post)


@pytest.mark.parametrize("payload", [b"[1, 2]", b'"a string"', b"42", b"null"])
@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_a_body_that_is_not_an_object_is_400(gateway: RunningGateway, post: Post, payload: bytes) -> None:
    r = _send(gateway, post, payload)
    assert r.status_code == 400 and "object" in _named(r, post)


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_a_mistyped_field_is_400_naming_it(gateway: RunningGateway, post: Post) -> None:
    body, name = post.wrong_type
    r = _send(gateway, post, _dumps(body))
    assert r.status_code == 400 and name in _named(r, post), r.text


@pytest.mark.parametrize("post", [p for p in POSTS if p.name != "realtime.sessions"],
                         ids=[p.name for p in POSTS if p.name != "realtime.sessions"])
def test_a_mistyped_model_is_400_naming_model(gateway: RunningGateway, post: Post) -> None:
    if post.name == "videos.remix":
        pytest.skip("a remix takes its model from the source video")
    r = _send(gateway, post, _dumps({**post.valid, "model": 5}))
    assert r.status_code == 400 and "model" in _named(r, post)


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_each_missing_required_field_is_a_4xx_naming_it(gateway: RunningGateway, post: Post) -> None:
    required = [k for k in post.valid if not (post.name == "realtime.sessions" and k == "model")]
    for name in required:
        body = {k: v for k, v in post.valid.items() if k != name}
        r = _send(gateway, post, _dumps(body))
        assert 400 <= r.status_code < 500 and name in _named(r, post), f"{name}: {r.text}"


NEED_A_FIELD = [p for p in POSTS if p.name != "realtime.sessions"]  # a session needs nothing: all defaults


@pytest.mark.parametrize("post", NEED_A_FIELD, ids=[p.name for p in NEED_A_FIELD])
def test_an_empty_object_is_a_4xx(gateway: RunningGateway, post: Post) -> None:
    r = _send(gateway, post, b"{}")
    assert 400 <= r.status_code < 500 and _named(r, post)


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_deeply_nested_json_is_400_not_a_crash(gateway: RunningGateway, post: Post) -> None:
    r = _send(gateway, post, b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert r.status_code == 400


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_an_unknown_content_encoding_is_415(gateway: RunningGateway, post: Post) -> None:
    r = _send(gateway, post, _dumps(post.valid), **{"Content-Encoding": "br"})
    assert r.status_code == 415 and "Content-Encoding" in _named(r, post)


def test_a_zstd_body_is_accepted_on_systemone(gateway: RunningGateway) -> None:
    post = next(p for p in POSTS if p.name == "systemone")
    big = {**SYSTEM_ONE, "state": "my card was charged twice. " * 60}  # >= 1 KiB, as typesafe-sdk compresses
    r = _send(gateway, post, zstandard.ZstdCompressor().compress(_dumps(big)), **{"Content-Encoding": "zstd"})
    assert r.status_code == 200, r.text
    assert set(r.json()["answers"]) == {"billing"}


def test_a_corrupt_zstd_body_is_400_naming_content_encoding(gateway: RunningGateway) -> None:
    post = next(p for p in POSTS if p.name == "systemone")
    r = _send(gateway, post, b"\x28\xb5\x2f\xfd garbage", **{"Content-Encoding": "zstd"})
    assert r.status_code == 400 and "Content-Encoding" in _named(r, post)


def test_a_malformed_multipart_video_body_is_400(gateway: RunningGateway) -> None:
    post = next(p for p in POSTS if p.name == "videos")
    r = _send(gateway, post, b"--x\r\nnot a part", "multipart/form-data; boundary=x")
    assert r.status_code == 400


@pytest.mark.parametrize("query", ["limit=abc", "limit=0", "limit=101", "order=sideways"])
def test_bad_video_list_parameters_are_400_naming_them(gateway: RunningGateway, query: str) -> None:
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    r = httpx.get(f"{gateway.base_url}/videos?{query}", headers=headers, timeout=TIMEOUT)
    assert r.status_code == 400 and r.json()["error"]["param"] == query.split("=")[0]


# --- body size ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    running = start_gateway(Path(tmp_path_factory.mktemp("small")) / "g.sqlite", "--max-body-bytes", "2048")
    yield running
    stop_gateway(running)


def _oversized(post: Post) -> bytes:
    return _dumps({**post.valid, "padding": "x" * 4096})


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_an_oversized_body_is_413_naming_the_body(small_gateway: RunningGateway, post: Post) -> None:
    r = _send(small_gateway, post, _oversized(post))
    assert r.status_code == 413 and "body" in _named(r, post).lower()


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_an_oversized_chunked_body_without_length_is_413(small_gateway: RunningGateway, post: Post) -> None:
    data = _oversized(post)

    def chunks() -> Iterator[bytes]:  # a generator: httpx sends it chunked, with no Content-Length
        for start in range(0, len(data), 512):
            yield data[start:start + 512]

    headers = {"Authorization": f"Bearer {small_gateway.api_key}", "Content-Type": "application/json",
               **post.headers}
    r = httpx.post(f"{small_gateway.base_url}{post.path}", content=chunks(), headers=headers, timeout=TIMEOUT)
    assert r.status_code == 413, r.text


def test_a_zstd_body_that_inflates_past_the_limit_is_413(small_gateway: RunningGateway) -> None:
    post = next(p for p in POSTS if p.name == "systemone")
    bomb = zstandard.ZstdCompressor().compress(_dumps({**SYSTEM_ONE, "state": "a" * 1_000_000}))
    assert len(bomb) < 2048
    r = _send(small_gateway, post, bomb, **{"Content-Encoding": "zstd"})
    assert r.status_code == 413


def test_a_small_body_still_works_on_the_small_gateway(small_gateway: RunningGateway) -> None:
    post = next(p for p in POSTS if p.name == "decisions")
    assert _send(small_gateway, post, _dumps(SYSTEM_ONE)).status_code == 200


def test_an_oversized_multipart_video_is_413(small_gateway: RunningGateway) -> None:
    r = httpx.post(f"{small_gateway.base_url}/videos", data={"prompt": "x"}, timeout=TIMEOUT,
                   files={"input_reference": ("a.png", b"\x89PNG" + b"0" * 8192, "image/png")},
                   headers={"Authorization": f"Bearer {small_gateway.api_key}"})
    assert r.status_code == 413


# --- lone surrogates (issue 30, finding 6: a tokenizer's UnicodeEncodeError was a 500) ----------------------
def _text_fields(value: Any, where: str = "") -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(dotted name, key path) of every string in a body."""
    if isinstance(value, str):
        yield where, ()
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        name = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key
        for inner, path in _text_fields(item, name):
            yield inner, (key, *path)


def _with(body: Any, path: tuple[Any, ...], text: str) -> Any:
    copy = json.loads(json.dumps(body))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = text
    return copy


TEXT_FIELDS = [(post, name, path) for post in POSTS for name, path in _text_fields(post.valid)]


@pytest.mark.parametrize(("post", "name", "path"), TEXT_FIELDS, ids=[f"{p.name}:{n}" for p, n, _ in TEXT_FIELDS])
def test_a_lone_surrogate_in_any_text_field_is_400_naming_it(gateway: RunningGateway, post: Post, name: str,
                                                             path: tuple[Any, ...]) -> None:
    body = _with(post.valid, path, "hi \ud800 there")
    r = _send(gateway, post, _dumps(body))  # json.dumps writes it escaped, as \ud800
    assert r.status_code == 400 and name in _named(r, post) and "surrogate" in _named(r, post), r.text


@pytest.mark.parametrize("post", POSTS, ids=ids)
def test_a_lone_surrogate_sent_as_raw_bytes_is_400(gateway: RunningGateway, post: Post) -> None:
    _name, path = next(_text_fields(post.valid))
    marked = _dumps(_with(post.valid, path, "MARK"))
    r = _send(gateway, post, marked.replace(b"MARK", b"\xed\xa0\x80"))  # json.loads reads with surrogatepass
    assert r.status_code == 400, r.text


def test_a_lone_surrogate_in_a_field_name_is_400(gateway: RunningGateway) -> None:
    post = next(p for p in POSTS if p.name == "chat")
    r = _send(gateway, post, _dumps({**post.valid, "metadata": {"\udfff": "x"}}))
    assert r.status_code == 400 and "metadata" in _named(r, post)


def test_a_surrogate_pair_is_ordinary_text(gateway: RunningGateway) -> None:
    post = next(p for p in POSTS if p.name == "embeddings")
    r = _send(gateway, post, b'{"model": "%s", "input": "cat \\ud83d\\ude00"}' % DECIDE.encode())
    assert r.status_code == 200, r.text


def test_a_truncated_gzip_body_is_400_naming_content_encoding(gateway: RunningGateway) -> None:
    post = next(p for p in POSTS if p.name == "chat")
    r = _send(gateway, post, gzip.compress(_dumps(post.valid))[:-12], **{"Content-Encoding": "gzip"})
    assert r.status_code == 400 and "Content-Encoding" in _named(r, post)
