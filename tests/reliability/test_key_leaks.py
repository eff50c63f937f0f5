"""A canary key through a representative workload, then searched for everywhere it could have landed.

The workload: every client family (models, chat, responses, messages, decisions, videos, realtime
with an ephemeral token and an error event), errors of each kind (local refusal, 404, 400, a stream
cut by the fault proxy, a refused realtime handshake), a `df.gw.decide` batch with a checkpoint, the
widgets' states, with DEBUG logging on for every logger and the gateway's stdout and stderr captured.
The places searched: the captured logs, exception texts, the client ledger (frame and SQLite file),
the gateway's SQLite files (-wal and -shm included), the checkpoint, widget states, the gateway's
output, and the saved notebooks; each for the key as is, base64-encoded (standard and URL-safe, at
every byte alignment) and URL-encoded. The gateway stores a key's first 10 characters as its
display prefix (gwlab keys list) by design, so only longer fragments count.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
import pytest

from gwlab import errors
from gwlab.client.gateway import Gateway
from tests.support.fault_proxy import CutResponse, Exchange, Fault, FaultProxy, Pass
from tests.support.gateways import make_key
from tests.support.models import DECIDE_MODEL as DECIDE
from tests.support.models import REALTIME_MODEL as REALTIME
from tests.support.models import TEXT_MODEL as TEXT
from tests.support.models import VIDEO_MODEL as VIDEO
from tests.support.tickets import SHORT_QUESTIONS as QUESTIONS
from tests.support.tickets import tickets

ROOT = Path(__file__).resolve().parents[2]
KEY_PATTERN = re.compile(rb"gwl_[A-Za-z0-9_-]{20,}")  # any gwlab key (the 10-character display prefix is not)


def encodings(secret: str) -> dict[str, bytes]:
    """The forms a key can take on its way into a file: as is, URL-encoded, base64 at each alignment."""
    raw = secret.encode()
    forms = {"raw": raw, "url": quote(secret, safe="").encode(), "url+": quote(f"Bearer {secret}").encode()}
    for offset in range(3):
        encoded = base64.b64encode(b"x" * offset + raw)
        core = encoded[4 if offset else 0:-4]  # the blocks made of the key's bytes only
        forms[f"base64@{offset}"] = core
        forms[f"base64url@{offset}"] = core.replace(b"+", b"-").replace(b"/", b"_")
    return forms


@dataclass
class Scan:
    """What the workload left behind, by place: (name, bytes) pairs."""

    key: str = field(repr=False)
    places: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)  # proof the workload ran (counts, never contents)

    def add(self, place: str, name: str, content: str | bytes) -> None:
        data = content.encode("utf-8", "replace") if isinstance(content, str) else content
        self.places.setdefault(place, []).append((name, data))

    def hits(self, place: str) -> list[str]:
        forms = encodings(self.key)
        return [f"{name}: {form}" for name, data in self.places.get(place, []) for form, needle in forms.items()
                if needle in data]


def _cut_first_chat_stream() -> Callable[[Exchange], Fault]:
    state = {"done": False}

    def script(exchange: Exchange) -> Fault:
        if exchange.path == "/v1/chat/completions" and not state["done"]:
            state["done"] = True
            return CutResponse(200)
        return Pass()

    return script


def _serve(db: Path, stderr: io.TextIOBase | Any) -> tuple[subprocess.Popen[str], str]:
    """`gwlab serve` with its stderr in a file and its stdout kept, to search both afterwards."""
    process = subprocess.Popen([sys.executable, "-m", "gwlab.cli", "serve", "--db", str(db)],
                               stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    assert url.startswith("http://"), url
    return process, url


def _workload(gw: Gateway, proxy_gw: Gateway, tmp: Path, scan: Scan) -> None:
    failures: list[BaseException] = []

    def expect(error: type[BaseException], call: Callable[[], Any]) -> None:
        with pytest.raises(error) as caught:
            call()
        failures.append(caught.value)

    gw.models()
    gw.chat("Q: Say hi.\nA:", model=TEXT, max_tokens=2)
    gw.chat.stream("Q: Say hi.\nA:", model=TEXT, max_tokens=2).collect()
    gw.responses.create("Q: Say hi.\nA:", model=TEXT, max_output_tokens=2)
    gw.responses.stream("Q: Say hi.\nA:", model=TEXT, max_output_tokens=2).collect()
    gw.messages.create("Q: Say hi.\nA:", model=TEXT, max_tokens=2)
    gw.messages.stream("Q: Say hi.\nA:", model=TEXT, max_tokens=2).collect()
    gw.decide("my card was charged twice", QUESTIONS, model=DECIDE)
    video = gw.videos.create("a canary in a coal mine", model=VIDEO)
    gw.videos.get(video.id)
    gw.videos.list()
    expect(errors.InvalidRequest, lambda: gw.decide("x", {"q": {"type": "maybe"}}, model=DECIDE))
    expect(errors.NotFound, lambda: gw.decide("x", QUESTIONS, model="local/no-such-model"))
    # a 400 from the gateway: n=9 is valid chat, so the client sends it; the local models refuse n > 8
    expect(errors.BadRequest, lambda: gw.chat("hi", model=TEXT, max_tokens=2, n=9))
    expect(errors.NotFound, lambda: gw.videos.get("video_missing"))
    expect(errors.StreamInterrupted,
           lambda: proxy_gw.chat.stream("Q: Count to ten.\nA:", model=TEXT, max_tokens=16).collect())
    with gw.realtime.connect(REALTIME, session={"instructions": "Be brief."}) as rt:
        rt.wait_for("session.updated", timeout=60)
        rt.send({"type": "conversation.item.create", "event_id": "leak_probe", "item": {"type": "message"}})
        rt.wait_for("error", timeout=60)
    token = gw.realtime.session_token(REALTIME)
    with gw.realtime.connect(REALTIME, ephemeral_token=token) as rt:
        rt.wait_for("session.created", timeout=60)
    expect(errors.AuthenticationFailed, lambda: gw.realtime.connect(REALTIME, ephemeral_token=token).open())
    out = tickets(6, "leak-").gw.decide("{ticket}", QUESTIONS, gateway=gw, checkpoint=tmp / "checkpoint.sqlite",
                                        progress=False)
    scan.add("client", "batch frame", out.to_csv() + repr(out) + out.run.text())
    for error in failures:
        scan.add("exceptions", type(error).__name__, "\n".join([
            str(error), repr(error), "".join(traceback.format_exception(error)),
            repr(getattr(error, "body", None)), repr(getattr(error, "headers", None)),
            repr(getattr(error, "partial", None))]))
    scan.facts["exceptions"] = len(failures)


def _widget_states(gw: Gateway, scan: Scan) -> None:
    from gwlab.widgets import DecisionExplorer, StreamConsole, UsageDashboard

    console = StreamConsole(gw, model=TEXT, max_tokens=2)
    console.submit("Q: Say hi.\nA:").result(timeout=180)
    explorer = DecisionExplorer(gw, state="my card was charged twice")
    future = explorer.run()
    if future is not None:
        future.result(timeout=180)
    dashboard = UsageDashboard(gw, start=False)
    dashboard.refresh()
    for widget in (console, explorer, dashboard):
        state = widget.get_state()
        scan.add("widgets", type(widget).__name__, json.dumps(state, default=repr) + repr(widget))
        widget.close()
    scan.facts["widgets"] = 3


def _files(tmp: Path, scan: Scan, when: str) -> None:
    """Every file written: the SQLite files with their -wal and -shm (gateway, ledger, checkpoint), stderr."""
    for path in sorted(p for p in tmp.rglob("*") if p.is_file()):  # the gateway's files folder too
        top = path.relative_to(tmp).parts[0]
        place = {"gateway": "gateway files", "gateway-files": "gateway files", "ledger": "client",
                 "checkpoint": "checkpoint"}.get(top.split(".")[0], "other files")
        scan.add(place, f"{path.relative_to(tmp)} ({when})", path.read_bytes())


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scan]:
    tmp = tmp_path_factory.mktemp("leaks")
    db = tmp / "gateway.sqlite"
    key = make_key(db, "canary")
    result = Scan(key)
    logs = io.StringIO()
    handler = logging.StreamHandler(logs)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root, level = logging.getLogger(), logging.getLogger().level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    with open(tmp / "gateway.stderr", "w") as stderr:
        process, url = _serve(db, stderr)
        try:
            with Gateway(url, key, ledger_path=tmp / "ledger.sqlite") as gw, \
                    FaultProxy(url, _cut_first_chat_stream()) as proxy, Gateway(proxy.base_url, key) as proxy_gw:
                _workload(gw, proxy_gw, tmp, result)
                _widget_states(gw, result)
                frame: pd.DataFrame = gw.usage
                result.add("client", "ledger frame", frame.to_csv() + repr(frame) + repr(gw.ledger.entries()))
                result.add("client", "realtime errors", repr(gw.ledger.realtime_errors()))
                result.add("client", "reprs", repr(gw) + repr(vars(gw)) + repr(gw.twin.transport.__dict__))
                result.facts["ledger rows"] = len(frame)
                result.facts["realtime errors"] = len(gw.ledger.realtime_errors())
            _files(tmp, result, "while running")  # the -wal files exist while the gateway holds them open
        finally:
            root.removeHandler(handler)
            root.setLevel(level)
            process.terminate()
            rest, _ = process.communicate(timeout=30)
    result.add("gateway output", "stdout", url + "\n" + rest)
    result.add("gateway output", "stderr", (tmp / "gateway.stderr").read_bytes())
    result.add("logs", "DEBUG log of every logger", logs.getvalue())
    result.facts["log records"] = logs.getvalue().count("\n")
    result.facts["websocket handshake logged"] = "websockets.client DEBUG > GET" in logs.getvalue()
    _files(tmp, result, "after the stop")
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        result.add("notebooks", notebook.name, notebook.read_bytes())
    yield result


PLACES = ["logs", "exceptions", "client", "gateway files", "checkpoint", "widgets", "gateway output", "notebooks",
          "other files"]


@pytest.mark.parametrize("place", PLACES)
def test_the_canary_key_is_nowhere_raw_base64_or_url_encoded(scan: Scan, place: str) -> None:
    assert place in scan.places or place == "other files", f"nothing was collected from {place}"
    assert scan.hits(place) == []


def test_saved_notebooks_hold_no_gateway_key_at_all(scan: Scan) -> None:
    found = [name for name, data in scan.places["notebooks"] if KEY_PATTERN.search(data)]
    assert found == []


def test_a_notebook_whose_code_reads_a_key_is_saved_without_any_output() -> None:
    """Whatever such a notebook printed could hold the key (a typo, a repr, a traceback): it keeps none."""
    reading = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        if any(word in "".join(c["source"]) for c in code for word in ("getpass", "GWLAB_API_KEY")):
            reading.append(path.name)
            assert all(c["outputs"] == [] for c in code), f"{path.name} was saved with outputs"
    assert "08-bring-your-own-gateway.ipynb" in reading


def test_a_notebook_that_asks_for_a_key_reads_every_answer_without_echo() -> None:
    """input() echoes what was typed into the cell's output, so a key pasted into the wrong prompt would
    be saved with the notebook when a person runs it; getpass echoes nothing."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        if "getpass" in code:
            assert "input(" not in code, f"{path.name} reads an answer with input(): use getpass"


def test_the_scan_searched_a_real_workload(scan: Scan) -> None:
    facts = scan.facts
    searched = sum(len(data) for items in scan.places.values() for _, data in items)
    print(f"\nkey-leak scan: {searched / 1e6:.1f} MB in {sum(map(len, scan.places.values()))} places searched for "
          f"{len(encodings(scan.key))} forms of the canary: 0 hits; {facts}")
    assert facts["ledger rows"] >= 20 and facts["realtime errors"] >= 1 and facts["exceptions"] >= 6
    assert facts["log records"] >= 50 and facts["websocket handshake logged"] and facts["widgets"] == 3
    assert any("-wal" in name for name, _ in scan.places["gateway files"])
