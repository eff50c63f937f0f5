"""The `gwlab` command: keys shown once and stored hashed, and `gwlab serve` as scripts expect it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.gateways import run_cli


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `gwlab` without raising on a failing exit code (run_cli checks it)."""
    return subprocess.run([sys.executable, "-m", "gwlab.cli", *args, "--db", str(db)], capture_output=True,
                          text=True, timeout=120)


def test_keys_create_prints_the_key_alone_on_its_line(tmp_path: Path) -> None:
    out = run_cli("keys", "create", "--name", "alone", "--db", str(tmp_path / "g.sqlite")).stdout
    lines = out.splitlines()
    assert len(lines) == 1 and out == lines[0] + "\n"
    assert re.fullmatch(r"gwl_[A-Za-z0-9_-]{40,}", lines[0])


def test_keys_list_shows_name_prefix_status_created_and_never_the_key(tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    key = run_cli("keys", "create", "--name", "listed", "--db", str(db)).stdout.strip()
    restricted = run_cli("keys", "create", "--name", "narrow", "--models", "local/decide-e5-small",
                         "--db", str(db)).stdout.strip()
    out = run_cli("keys", "list", "--db", str(db)).stdout
    header, *rows = out.splitlines()
    assert header.split()[:4] == ["NAME", "PREFIX", "STATUS", "CREATED"]
    listed = next(r for r in rows if r.startswith("listed "))
    assert key[:10] in listed and "active" in listed and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", listed)
    assert "local/decide-e5-small" in next(r for r in rows if r.startswith("narrow "))
    assert key not in out and restricted not in out
    assert key[10:20] not in out  # nothing beyond the prefix


def test_disable_then_delete_a_key(tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    run_cli("keys", "create", "--name", "temp", "--db", str(db))
    assert _cli(db, "keys", "disable", "temp").returncode == 0
    rows = _cli(db, "keys", "list").stdout.splitlines()
    assert "disabled" in next(r for r in rows if r.startswith("temp "))
    assert _cli(db, "keys", "delete", "temp").returncode == 0
    assert not any(r.startswith("temp ") for r in _cli(db, "keys", "list").stdout.splitlines())


@pytest.mark.parametrize("action", ["disable", "delete"])
def test_an_unknown_key_name_fails_with_a_message(tmp_path: Path, action: str) -> None:
    done = _cli(tmp_path / "g.sqlite", "keys", action, "nobody")
    assert done.returncode == 1 and "nobody" in done.stderr and not done.stdout


def test_a_duplicate_key_name_fails_without_printing_a_key(tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    run_cli("keys", "create", "--name", "twice", "--db", str(db))
    again = _cli(db, "keys", "create", "--name", "twice")
    assert again.returncode == 1 and "twice" in again.stderr and "gwl_" not in again.stdout + again.stderr


def test_keys_are_stored_hashed(tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    key = run_cli("keys", "create", "--name", "hashed", "--db", str(db)).stdout.strip()
    process = _serve(db)  # use the key too, so the request log has had its chance to store it
    try:
        url = process.stdout.readline().strip()
        r = httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert r.status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    files = [p for p in tmp_path.iterdir() if p.name.startswith("g.sqlite")]
    assert files
    for path in files:
        data = path.read_bytes()
        assert key.encode() not in data and key[10:].encode() not in data, path.name


def _serve(db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gwlab.cli", "serve", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_prints_the_base_url_first_and_exits_0_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "g.sqlite"
    key = run_cli("keys", "create", "--name", "serve", "--db", str(db)).stdout.strip()
    process = _serve(db)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url)
        r = httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert r.status_code == 200
        process.send_signal(sig)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    stderr = process.stderr.read() if process.stderr else ""
    assert "Traceback" not in stderr and key not in stderr


def test_serve_takes_its_port_and_limits_from_flags(tmp_path: Path) -> None:
    db = tmp_path / "g.sqlite"
    key = run_cli("keys", "create", "--name", "flags", "--db", str(db)).stdout.strip()
    args = ["serve", "--db", str(db), "--rate-limit-rpm", "7", "--max-body-bytes", "100"]
    process = subprocess.Popen([sys.executable, "-m", "gwlab.cli", *args], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        headers = {"Authorization": f"Bearer {key}"}
        r = httpx.get(f"{url}/models", headers=headers, timeout=30)
        assert r.headers["x-ratelimit-limit-requests"] == "7"
        big = httpx.post(f"{url}/decisions", headers=headers, json={"state": "x" * 200}, timeout=30)
        assert big.status_code == 413
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
