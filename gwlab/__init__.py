"""gwlab: a notebook toolkit for a multi-protocol AI model gateway.

    import gwlab
    gw = gwlab.connect()     # GWLAB_BASE_URL + GWLAB_API_KEY, else the embedded local gateway
    gw.models(); gw.chat("Hello", model=...); gw.usage

Importing gwlab registers `df.gw` (so pandas loads) but stays light otherwise: the embedded gateway,
its models, the widgets and jsonschema load when first used.

The names below are the public face, as httpx's: each is documented in docs/reference/gwlab.md (a test
holds the two lists equal) and reports `gwlab` as its module, so reprs, tracebacks and help() show the
name a user imports rather than the module it happens to live in today.
"""

from __future__ import annotations

from gwlab import errors
from gwlab.client.config import ClientConfig
from gwlab.client.dialect import Dialect
from gwlab.client.gateway import AsyncGateway, Gateway
from gwlab.client.ledger import label_calls
from gwlab.client.streams import AsyncEventStream, EventStream
from gwlab.connection import connect, current_gateway
from gwlab.errors import (
    AnswerInvalid,
    AuthenticationFailed,
    BadRequest,
    BatchRowError,
    ConnectionFailed,
    EvaluationWarning,
    FilterWarning,
    GatewayError,
    IncompleteStream,
    InputLimitWarning,
    InvalidEvent,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    ProtocolError,
    RateLimited,
    RealtimeError,
    RepeatsWarning,
    RunInterrupted,
    RunRecordWarning,
    ServerError,
    StatusError,
    StreamError,
    StreamInterrupted,
    StructuredFallbackWarning,
    Timeout,
)
from gwlab.frames import accessor as _accessor  # noqa: F401  (importing registers df.gw)
from gwlab.frames.batch.jobs import BatchOptions, batches
from gwlab.frames.cascade.spec import Cascade, DecisionOracle, LabelsOracle, TextOracle
from gwlab.frames.evaluation.compare import compare
from gwlab.frames.evaluation.estimate import estimate
from gwlab.frames.evaluation.evaluate import evaluate
from gwlab.frames.evaluation.fields import evaluate_fields
from gwlab.frames.evaluation.label_plan import LabelPlan, PlanOptions, label_plan
from gwlab.frames.evaluation.label_store import LabelStore
from gwlab.frames.evaluation.labelling import LabelSession, SessionOptions
from gwlab.frames.evaluation.repeats import stability
from gwlab.frames.evaluation.sequential_compare import Sequential, SequentialComparison, compare_sequential
from gwlab.frames.grounding.view import show_grounding
from gwlab.frames.run.budget import Budget
from gwlab.frames.run.records import run_answers, runs
from gwlab.wire.chat import ChatCompletion
from gwlab.wire.decisions import DecisionResult
from gwlab.wire.jobs.tasks import Task, TaskFamily
from gwlab.wire.messages import Message
from gwlab.wire.responses import Response

__version__ = "0.1.0"

__all__ = [
    "AnswerInvalid",
    "AsyncEventStream",
    "AsyncGateway",
    "AuthenticationFailed",
    "BadRequest",
    "BatchOptions",
    "BatchRowError",
    "Budget",
    "Cascade",
    "ChatCompletion",
    "ClientConfig",
    "ConnectionFailed",
    "DecisionOracle",
    "DecisionResult",
    "Dialect",
    "EvaluationWarning",
    "EventStream",
    "FilterWarning",
    "Gateway",
    "GatewayError",
    "IncompleteStream",
    "InputLimitWarning",
    "InvalidEvent",
    "InvalidRequest",
    "LabelPlan",
    "LabelSession",
    "LabelStore",
    "LabelsOracle",
    "Message",
    "NotFound",
    "PermissionDenied",
    "PlanOptions",
    "ProtocolError",
    "RateLimited",
    "RealtimeError",
    "RepeatsWarning",
    "Response",
    "RunInterrupted",
    "RunRecordWarning",
    "Sequential",
    "SequentialComparison",
    "ServerError",
    "SessionOptions",
    "StatusError",
    "StreamError",
    "StreamInterrupted",
    "StructuredFallbackWarning",
    "Task",
    "TaskFamily",
    "TextOracle",
    "Timeout",
    "batches",
    "compare",
    "compare_sequential",
    "connect",
    "current_gateway",
    "errors",
    "estimate",
    "evaluate",
    "evaluate_fields",
    "label_calls",
    "label_plan",
    "run_answers",
    "runs",
    "show_grounding",
    "stability",
]

for _name in __all__:
    _obj = globals()[_name]
    if hasattr(_obj, "__module__") and _name != "errors":
        _obj.__module__ = "gwlab"  # as httpx: the name a user imports, not the file it lives in
del _name, _obj


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext gwlab`: the `%gw` / `%%gw` magics (gwlab/magics.py)."""
    from gwlab.magics import load_ipython_extension as load

    load(ipython)  # type: ignore[arg-type]  # IPython's shell, typed object: importing gwlab needs no IPython
