"""Issue 30, finding 2: a compressed body is expanded against the body limit as it expands.

Before the fix the 32 MiB limit was checked after the whole body was decompressed: a small gzip body
expanding to hundreds of MB, or a zstd frame declaring GBs, drove the gateway's memory up by the same
amount before its 413. Here each bomb (about a megabyte on the wire at most) goes to a real `gwlab serve`
subprocess and the claim is checked twice: the answer is a 413, and the process's peak resident memory
(VmHWM, the kernel's high-water mark: no sampling, no timing) rose by less than 100 MB."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import zstandard

from gwlab.wire.limits import MAX_BODY_BYTES_DEFAULT as LIMIT
from tests.support.gateways import RunningGateway, own_gateway

GiB, MiB = 1 << 30, 1 << 20
ZEROS = bytes(16 * MiB)
RISE_BOUND = 100 * MiB  # generous: the budgeted decoder holds at most the limit (32 MiB) plus a chunk
CHAT = "/chat/completions"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    with own_gateway(Path(tmp_path_factory.mktemp("bombs")) / "gateway.sqlite") as running:
        yield running


def _reset_peak(gateway: RunningGateway) -> None:
    """Start the peak over from the present resident set (Linux: 5 to /proc/PID/clear_refs)."""
    Path(f"/proc/{gateway.process.pid}/clear_refs").write_text("5")


def _peak_rss(gateway: RunningGateway) -> int:
    """The process's peak resident set in bytes (VmHWM in /proc/PID/status)."""
    for line in Path(f"/proc/{gateway.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM line in /proc/PID/status")


def _post(gateway: RunningGateway, body: bytes, encoding: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {gateway.api_key}", "Content-Type": "application/json",
               "Content-Encoding": encoding}
    return httpx.post(f"{gateway.base_url}{CHAT}", content=body, headers=headers, timeout=120)


def _warm(gateway: RunningGateway, encoding: str, compress: object) -> None:
    """One ordinary compressed body first, so the decoder's own code and buffers are already counted."""
    small = json.dumps({"model": "local/gemma-3-270m", "messages": "not a list"}).encode()
    r = _post(gateway, compress(small), encoding)  # type: ignore[operator]
    assert r.status_code == 400 and "messages" in r.text, r.text


def _gzip_bomb(expanded: int) -> bytes:
    """Gzip members of 64 MiB of zeros each (about 64 KB), concatenated: a valid gzip body."""
    member = gzip.compress(bytes(64 * MiB), compresslevel=9)
    return member * (expanded // (64 * MiB))


def _zstd_bomb(expanded: int, *, declared: bool) -> bytes:
    """One zstd frame of `expanded` zero bytes, its size written in the frame header when `declared`."""
    compressor = zstandard.ZstdCompressor(level=1, write_content_size=declared)
    stream = compressor.compressobj(size=expanded if declared else -1)
    parts = [stream.compress(ZEROS) for _ in range(expanded // len(ZEROS))]
    return b"".join([*parts, stream.flush()])


def _assert_refused_within_memory(gateway: RunningGateway, body: bytes, encoding: str) -> None:
    _reset_peak(gateway)
    before = _peak_rss(gateway)
    r = _post(gateway, body, encoding)
    rise = _peak_rss(gateway) - before
    print(f"\n{encoding} body of {len(body) / 1024:.0f} KiB: {r.status_code}, peak memory +{rise / MiB:.0f} MiB")
    assert r.status_code == 413 and r.json()["error"]["param"] == "body", r.text[:300]
    assert rise < RISE_BOUND, f"peak memory rose by {rise / MiB:.0f} MiB for a {len(body) / 1024:.0f} KiB body"


def test_a_gzip_bomb_is_413_without_expanding_in_memory(gateway: RunningGateway) -> None:
    _warm(gateway, "gzip", gzip.compress)
    bomb = _gzip_bomb(GiB)
    assert len(bomb) < 2 * MiB
    _assert_refused_within_memory(gateway, bomb, "gzip")


def test_a_zstd_frame_declaring_gigabytes_is_413_before_allocating(gateway: RunningGateway) -> None:
    _warm(gateway, "zstd", zstandard.ZstdCompressor().compress)
    bomb = _zstd_bomb(2 * GiB, declared=True)
    assert len(bomb) < 2 * MiB and zstandard.frame_content_size(bomb) == 2 * GiB
    _assert_refused_within_memory(gateway, bomb, "zstd")


def test_a_zstd_stream_of_undeclared_size_is_413_without_expanding_in_memory(gateway: RunningGateway) -> None:
    _warm(gateway, "zstd", zstandard.ZstdCompressor().compress)
    bomb = _zstd_bomb(768 * MiB, declared=False)
    assert len(bomb) < 2 * MiB and zstandard.frame_content_size(bomb) == -1
    _assert_refused_within_memory(gateway, bomb, "zstd")


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_a_compressed_body_just_under_the_limit_is_still_read(gateway: RunningGateway, encoding: str) -> None:
    body = json.dumps({"model": "local/gemma-3-270m", "messages": "x" * (LIMIT - 100)}).encode()
    assert LIMIT - 100 < len(body) <= LIMIT
    packed = gzip.compress(body) if encoding == "gzip" else zstandard.ZstdCompressor().compress(body)
    r = _post(gateway, packed, encoding)
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages", r.text[:300]
