"""`gw.realtime`: sessions over WebSocket or WebRTC, their socket, what channels share; imported from here."""

from gwlab.client.realtime.connect import (
    AsyncRealtime,
    AsyncRealtimeConnection,
    EphemeralToken,
    FunctionCall,
    RateLimit,
    Realtime,
    RealtimeConnection,
    RealtimeError,
    RealtimeEvent,
    RealtimeSession,
    ServerEvent,
    Turn,
    UnknownEvent,
    parse_event,
    realtime_url,
)

__all__ = ["AsyncRealtime", "AsyncRealtimeConnection", "EphemeralToken", "FunctionCall", "RateLimit", "Realtime",
           "RealtimeConnection", "RealtimeError", "RealtimeEvent", "RealtimeSession", "ServerEvent", "Turn",
           "UnknownEvent", "parse_event", "realtime_url"]
