"""DecisionExplorer: edit a state and its questions, run them, read the probabilities as bars."""

from __future__ import annotations

import concurrent.futures
import json
import pprint
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import anywidget
import traitlets

from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.errors import GatewayError, InvalidRequest
from gwlab.widgets._bridge import Bridge
from gwlab.widgets._esm import esm_of
from gwlab.wire import decisions
from gwlab.wire.decisions import ChoiceAnswer, DecisionResult, NoulAnswer, ScoreAnswer
from gwlab.wire.models import DEFAULT_MODELS

__all__ = ["DecisionExplorer"]

DEFAULT_MODEL = DEFAULT_MODELS["decisions"]  # the one default of gw.decide and df.gw.decide
EXAMPLE_QUESTIONS: dict[str, Any] = {
    "urgent": {"type": "noul", "instructions": "Does this need action today?",
               "criteria": {"true": "something is broken or blocked now", "false": "it can wait"}},
    "topic": {"type": "choice", "instructions": "What is the message about?",
              "criteria": {"billing": "invoices, payments, refunds", "outage": "the service is down",
                           "feature": "a request for something new"}},
}


class DecisionExplorer(anywidget.AnyWidget):
    """A state and a JSON questions map to edit, a Run button, and the answers as probability bars.

    Parameters
    ----------
    gw : Gateway, optional
        From `gwlab.connect()` (default: the one it returned last).
    state : str or dict or list
        What every question is about (a JSON object or array is sent as structured state).
    questions : dict
        Question ID to ``{type, instructions, criteria}`` (the spec's decision request).
    model : str
        A decision model ID.

    Every edit is validated with the same `build_request` the client uses before sending, so an
    error names the field (``questions.urgent.criteria: ...``) before any request. `.questions`
    gives the edited questions back as a dict; the "copy as Python" box holds them as code.
    """

    _esm = esm_of(__file__)

    model = traitlets.Unicode(DEFAULT_MODEL).tag(sync=True)
    state = traitlets.Unicode("").tag(sync=True)
    questions_json = traitlets.Unicode("{}").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)  # starts with the field it names
    status = traitlets.Unicode("idle").tag(sync=True)  # idle | running | done | error
    answers = traitlets.List(traitlets.Dict()).tag(sync=True)
    usage = traitlets.Dict().tag(sync=True)
    python = traitlets.Unicode("").tag(sync=True)  # the questions as Python source

    def __init__(self, gw: Gateway | AsyncGateway | None = None, *, state: str | Mapping[str, Any] | Sequence[Any] = "",
                 questions: Mapping[str, Any] | None = None, model: str = DEFAULT_MODEL) -> None:
        text = state if isinstance(state, str) else json.dumps(state, indent=2, ensure_ascii=False)
        body = json.dumps(dict(EXAMPLE_QUESTIONS if questions is None else questions), indent=2, ensure_ascii=False)
        super().__init__(model=model, state=text, questions_json=body)
        self._bridge = Bridge(gw)
        self._done = threading.Event()
        self._done.set()
        self.result: DecisionResult | None = None
        self.on_msg(self._on_front_end)
        self._validate()

    # -- notebook API -----------------------------------------------------------------------------
    @property
    def questions(self) -> dict[str, Any]:
        """The edited questions as a dict (InvalidRequest naming the field if they are not valid)."""
        questions, _state = self._parsed()
        return questions

    def run(self) -> concurrent.futures.Future[None] | None:
        """Validate and send; None (and `error` set) when the request is refused locally."""
        if not self._validate():
            return None
        questions, state = self._parsed()
        self.status, self._done = "running", threading.Event()
        return self._bridge.submit(self._decide(state, questions))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ended and its answers are set, also in the cell that ran it.
        TimeoutError when `timeout` passed first."""
        return self._bridge.wait(self._done, timeout, "decision request")

    # -- validation -------------------------------------------------------------------------------
    def _parsed(self) -> tuple[dict[str, Any], Any]:
        try:
            questions = json.loads(self.questions_json)
        except ValueError as exc:
            raise InvalidRequest("questions", f"not valid JSON: {exc}") from None
        if not isinstance(questions, dict):
            raise InvalidRequest("questions", f"must be a JSON object of question IDs; got {type(questions).__name__}")
        decisions.build_request(_state(self.state), questions, self.model)  # strict writer: the client's own check
        return questions, _state(self.state)

    @traitlets.observe("state", "questions_json", "model")
    def _on_edit(self, _change: Any) -> None:
        self._validate()

    def _validate(self) -> bool:
        try:
            questions, _ = self._parsed()
        except InvalidRequest as exc:
            self.error = str(exc)
            return False
        self.error = ""
        self.python = "QUESTIONS = " + pprint.pformat(questions, sort_dicts=False, width=100) + "\n"
        return True

    def _on_front_end(self, _widget: Any, content: Mapping[str, Any], _buffers: Sequence[bytes]) -> None:
        if content.get("type") == "run":
            self.run()

    # -- the request (runs on the gateway's loop) -------------------------------------------------
    async def _decide(self, state: Any, questions: dict[str, Any]) -> None:
        update: dict[str, Any]
        try:
            result = await self._bridge.gateway.decide(state, questions, model=self.model)
            update = {"status": "done", "answers": [_answer_view(q, a) for q, a in result.answers.items()],
                      "usage": dict(result.usage), "error": ""}
            self.result = result
        except GatewayError as exc:
            update = {"status": "error", "error": str(exc)}
        except Exception as exc:  # shown in the widget, not lost in a background task
            update = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
        self._bridge.post(self._apply, update)
        self._done.set()

    def _apply(self, update: Mapping[str, Any]) -> None:
        with self.hold_sync():
            for name, value in update.items():
                setattr(self, name, value)


def _state(text: str) -> Any:
    """A JSON object or array is structured state; anything else is the text itself."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


def _answer_view(qid: str, answer: Any) -> dict[str, Any]:
    """One answer for the bars: label/probability pairs, the headline value, the confidence."""
    view: dict[str, Any] = {"id": qid, "type": answer.type, "value": answer.value, "confidence": None, "bars": []}
    if isinstance(answer, NoulAnswer) and answer.noul is not None:
        view["bars"] = [{"label": "true", "p": answer.noul}, {"label": "false", "p": 1.0 - answer.noul}]
    elif isinstance(answer, ChoiceAnswer | ScoreAnswer):
        legend = getattr(answer, "legend", {})
        view["confidence"] = answer.confidence
        view["bars"] = [{"label": f"{key} · {legend[key]}" if key in legend else key, "p": p}
                        for key, p in answer.probabilities.items()]
    return view
