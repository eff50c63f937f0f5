"""Limits, enums and header names of the spec, written once (one source of truth per fact)."""

from __future__ import annotations

# --- addressing and headers -------------------------------------------------------------------
API_PREFIX = "/v1"
ANTHROPIC_VERSION = "2023-06-01"  # the spec's value; the anthropic SDK 2.x sends the next one
ANTHROPIC_VERSIONS_ACCEPTED = ("2023-06-01", "2026-10-21")
REALTIME_BETA = "realtime=v1"
REALTIME_SUBPROTOCOL = "realtime"
REALTIME_KEY_SUBPROTOCOL_PREFIX = "openai-insecure-api-key."
REALTIME_BETA_SUBPROTOCOL = "openai-beta.realtime-v1"
REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-typesafe-request-id")
REQUEST_ID_HEADER = REQUEST_ID_HEADERS[0]  # the one the local gateway sends
# the embedded gateway's stable identity ("local:<digest>", gwlab/local/catalog.py), sent on every answer:
# checkpoints key its answers by it instead of by a URL whose port changes with every start
GATEWAY_ID_HEADER = "x-gwlab-gateway-id"
AUTHORIZATION_HEADER = "authorization"  # Bearer <key>: every family but messages by default
API_KEY_HEADER = "x-api-key"  # the messages family's key header
ANTHROPIC_VERSION_HEADER = "anthropic-version"
OPENAI_BETA_HEADER = "openai-beta"  # realtime=v1 on a realtime WebSocket

# --- decisions -------------------------------------------------------------------------------
QUESTION_TYPES = ("noul", "choice", "score")
MAX_CHOICE_OPTIONS = 255
MIN_CHOICE_OPTIONS = 2
MIN_SCORE_LEVELS = 2
MAX_SCORE_LEVELS = 10
MAX_QUESTIONS = 64
QUESTION_FIELDS = ("type", "instructions", "criteria")
NOUL_OUTCOMES = ("true", "false")
MAX_STATE_DEPTH = 64  # nesting of a JSON state; deeper is refused rather than recursed into
OPENAI_QUESTION_TYPES = ("predicate", "choice", "score")  # protocols.md §7.8
MAX_OPENAI_QUESTIONS = 400

# --- tools (function names as the OpenAI and Anthropic APIs accept them) -----------------------
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

# --- realtime (spec: Limits, Session configuration) -------------------------------------------
EPHEMERAL_TOKEN_SECONDS = 60
VOICES = ("alloy", "echo", "shimmer")
AUDIO_FORMATS = ("pcm16", "g711_ulaw", "g711_alaw")
MODALITIES = ("text", "audio")
TOOL_CHOICES = ("auto", "none", "required")
TEMPERATURE_RANGE = (0.0, 2.0)
TEMPERATURE_DEFAULT = 1.0
MAX_OUTPUT_TOKENS_RANGE = (1, 4096)
VAD_THRESHOLD_RANGE = (0.0, 1.0)
VAD_THRESHOLD_DEFAULT = 0.5
VAD_PREFIX_PADDING_MS_RANGE = (0, 5000)
VAD_PREFIX_PADDING_MS_DEFAULT = 500
VAD_SILENCE_DURATION_MS_RANGE = (100, 10000)
VAD_SILENCE_DURATION_MS_DEFAULT = 1000
PCM16_SAMPLE_RATE = 24_000
G711_SAMPLE_RATE = 8_000
WEBRTC_DATA_CHANNEL = "oai-events"
WEBRTC_CONNECTION_TIMEOUT_MS = 30_000
MAX_OUTPUT_TOKENS_DEFAULT = "inf"
TURN_DETECTION_TYPES = ("server_vad",)
RESPONSE_CONVERSATIONS = ("auto", "none")  # response.create: add the answer to the conversation or not
REALTIME_MIN_COMMIT_MS = 100  # a shorter input_audio_buffer.commit is refused (protocols.md §6.3)
REALTIME_MAX_APPEND_BYTES = 15 * 1024 * 1024  # decoded audio per input_audio_buffer.append
REALTIME_SESSION_SECONDS = 30 * 60  # beta sessions last at most 30 minutes (protocols.md §6.1)
REALTIME_MAX_ITEM_ID_LENGTH = 32
REALTIME_MAX_METADATA_KEYS = 16
WEBRTC_SAMPLE_RATE = 48_000  # Opus on the media tracks

# --- transport ------------------------------------------------------------------------------
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
QUOTA_EXHAUSTED_CODES = frozenset({"insufficient_quota", "quota_exhausted"})
MAX_BODY_BYTES_DEFAULT = 32 * 1024 * 1024
MAX_RETRIES_DEFAULT = 2  # as the openai and anthropic SDKs (protocols.md §5)
BACKOFF_BASE_SECONDS = 0.5  # 0.5 s · 2^n …
BACKOFF_MAX_SECONDS = 8.0  # … capped at 8 s …
BACKOFF_JITTER = 0.25  # … minus up to 25 %
RETRY_AFTER_CAP_SECONDS = 60.0  # a longer requested wait is not slept through: RateLimited is raised
CONNECT_TIMEOUT_SECONDS = 10.0
# connect()'s check that an address answers (one GET /models, no retry): a dead one fails within this
CONNECT_CHECK_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 120.0  # between two bytes of an answer, not for the whole answer
SHOULD_RETRY_HEADER = "x-should-retry"
RETRY_AFTER_MS_HEADER = "retry-after-ms"
RETRY_AFTER_HEADER = "retry-after"

# --- tasks (videos) -------------------------------------------------------------------------
VIDEO_STATUSES = ("queued", "in_progress", "completed", "failed")
VIDEO_TERMINAL = ("completed", "failed")
VIDEO_VARIANTS = ("video", "thumbnail", "spritesheet")
VIDEO_DEFAULT_VARIANT = "video"
VIDEO_SECONDS = ("4", "8", "12")  # strings on the wire
VIDEO_SIZES = ("720x1280", "1280x720", "1024x1792", "1792x1024")
VIDEO_LIST_LIMIT_RANGE = (1, 100)
LIST_ORDERS = ("asc", "desc")
TASK_CANCELLED_STATUSES = ("cancelled", "canceled")  # spec: cancellation is terminal too
VIDEO_POLL_AFTER_HEADER = "openai-poll-after-ms"
VIDEO_POLL_DEFAULT_SECONDS = 1.0
