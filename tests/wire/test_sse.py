"""The SSE decoder against the WHATWG event-stream rules (protocols.md §1)."""

from __future__ import annotations

import codecs

import pytest
from httpx_sse._decoders import SSEDecoder as HttpxSseDecoder
from httpx_sse._decoders import SSELineDecoder as HttpxSseLineDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

from gwlab.wire.sse import Event, SSEDecoder, decode


def feed_all(chunks: list[bytes]) -> list[Event]:
    decoder = SSEDecoder()
    events: list[Event] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.close()


def test_single_data_event_is_dispatched_at_the_blank_line() -> None:
    assert decode(b"data: hello\n\n") == [Event("message", "hello")]


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_lf_crlf_and_lone_cr_all_end_a_line(end: bytes) -> None:
    stream = b"event: a" + end + b"data: 1" + end + b"data: 2" + end + end
    assert decode(stream) == [Event("a", "1\n2")]


def test_cr_at_a_chunk_end_followed_by_lf_in_the_next_is_one_line_end() -> None:
    events = feed_all([b"data: x\r", b"\n\r", b"\ndata: y\r\n\r\n"])
    assert events == [Event("message", "x"), Event("message", "y")]


def test_cr_then_cr_across_chunks_is_two_line_ends() -> None:
    assert feed_all([b"data: x\r", b"\r"]) == [Event("message", "x")]


def test_only_one_leading_space_is_stripped() -> None:
    assert decode(b"data:  two\n\ndata:none\n\n") == [Event("message", " two"), Event("message", "none")]


def test_multiple_data_lines_are_joined_with_newline() -> None:
    assert decode(b"data: a\ndata:\ndata: c\n\n") == [Event("message", "a\n\nc")]


def test_comments_and_unknown_fields_are_ignored() -> None:
    assert decode(b": keep-alive\n\n:x\nfoo: bar\ndata: d\n\n") == [Event("message", "d")]


def test_line_without_colon_is_a_field_with_empty_value() -> None:
    assert decode(b"data\n\n") == [Event("message", "")]


def test_event_without_data_is_not_dispatched() -> None:
    assert decode(b"event: ping\n\nid: 7\n\nretry: 10\n\n") == []


def test_id_persists_across_events_and_a_nul_id_is_ignored() -> None:
    events = decode(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\x00x\ndata: c\n\nid\ndata: d\n\n")
    assert [e.id for e in events] == ["1", "1", "1", ""]


def test_retry_takes_only_ascii_digits() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b"retry: 150\ndata: a\n\nretry: 1.5\ndata: b\n\nretry: \xd9\xa3\ndata: c\n\n")
    assert [e.retry for e in events] == [150, None, None]
    assert decoder.retry == 150


def test_trailing_bytes_without_blank_line_are_discarded() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: cut") == [Event("message", "a")]
    assert decoder.pending_bytes == 9
    assert decoder.close() == []
    assert decoder.discarded_bytes == 9


def test_final_event_ended_by_a_single_newline_is_discarded() -> None:
    assert decode(b"data: a\n") == []


def test_utf8_character_split_across_chunks() -> None:
    payload = "data: déjà 東京 ✓\n\n".encode()
    for cut in range(1, len(payload)):
        assert feed_all([payload[:cut], payload[cut:]]) == [Event("message", "déjà 東京 ✓")]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert decode(b"data: a\xffb\n\n") == [Event("message", "a\ufffdb")]


def test_leading_bom_is_stripped_once() -> None:
    assert decode(b"\xef\xbb\xbfdata: a\n\n") == [Event("message", "a")]


def test_event_split_across_two_chunks_is_decoded_once() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: response.created\nda") == []
    assert decoder.feed(b"ta: {}\n") == []
    assert decoder.feed(b"\n") == [Event("response.created", "{}")]
    assert decoder.feed(b"data: next\n\n") == [Event("message", "next")]


def test_blank_line_straddling_two_chunks_dispatches() -> None:
    assert feed_all([b"data: a\n", b"\ndata: b\n", b"\n"]) == [Event("message", "a"), Event("message", "b")]


def test_extra_blank_lines_dispatch_nothing() -> None:
    assert decode(b"\n\n\ndata: a\n\n\n\n\ndata: b\n\n\n") == [Event("message", "a"), Event("message", "b")]


def test_data_done_marker_is_an_ordinary_event() -> None:
    assert decode(b"data: {\"a\":1}\n\ndata: [DONE]\n\n")[1].data == "[DONE]"


def test_event_json_parses_data() -> None:
    assert Event("message", '{"a": [1]}').json() == {"a": [1]}


# --- property tests ---------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)), max_size=12)
_name = st.text(st.characters(whitelist_categories=("Ll",)), min_size=1, max_size=8)
_line_end = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn, *, valid_only: bool = False) -> str:
    """Event streams mixing every framing rule; `valid_only` keeps one data line or more per event."""
    out = []
    for _ in range(draw(st.integers(0, 6))):
        end = draw(_line_end)
        lines = []
        if draw(st.booleans()):
            lines.append(f"event: {draw(_name)}")
        if draw(st.booleans()):
            lines.append(f"id: {draw(_text)}")
        if draw(st.booleans()):
            lines.append(f": {draw(_text)}")
        lo = 1 if valid_only else 0
        for _ in range(draw(st.integers(lo, 3))):
            lines.append(f"data:{draw(st.sampled_from(['', ' ', '  ']))}{draw(_text)}")
        if not valid_only and draw(st.booleans()):
            lines.append(f"retry: {draw(st.integers(0, 9999))}")
        out.append(end.join(lines) + end + end)
    if not valid_only and draw(st.booleans()):
        out.append("data: trailing, never dispatched")
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(stream=streams(), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_any_chunking_gives_the_same_events_as_one_chunk(stream: str, cuts: list[int]) -> None:
    payload = stream.encode()
    points = sorted({min(c, len(payload)) for c in cuts})
    chunks = [payload[a:b] for a, b in zip([0, *points], [*points, len(payload)], strict=True)]
    assert feed_all(chunks) == decode(payload)


@settings(max_examples=300, deadline=None)
@given(stream=streams(), size=st.integers(1, 7))
def test_byte_by_byte_and_small_chunks_agree_with_one_chunk(stream: str, size: int) -> None:
    payload = stream.encode()
    assert feed_all([payload[i : i + size] for i in range(0, len(payload), size)]) == decode(payload)


def httpx_sse_events(payload: bytes) -> list[Event]:
    text = codecs.getincrementaldecoder("utf-8")().decode(payload, final=True)
    lines, decoder = HttpxSseLineDecoder(), HttpxSseDecoder()
    out = []
    for line in [*lines.decode(text), *lines.flush()]:
        sse = decoder.decode(line.rstrip("\n"))
        if sse is not None:
            out.append(Event(sse.event or "message", sse.data, sse.id, sse.retry))
    return out


@settings(max_examples=300, deadline=None)
@given(stream=streams(valid_only=True))
def test_agrees_with_httpx_sse_on_valid_streams(stream: str) -> None:
    payload = stream.encode()
    assert decode(payload) == httpx_sse_events(payload)


@settings(max_examples=300, deadline=None)
@given(stream=streams())
def test_one_event_per_chunk_agrees_with_one_chunk(stream: str) -> None:
    payload = stream.encode()
    chunks = [part + b"\n\n" for part in payload.split(b"\n\n")]
    chunks[-1] = chunks[-1][:-2]
    assert feed_all(chunks) == decode(payload)
