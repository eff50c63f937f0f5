"""The local gateway's realtime sessions (spec: Realtime; protocols.md §6), one package.

- `session`: one session's state machine (client events in, server events out), shared by both channels;
- `responses`: a response's generation (text, audio, function calls) and its events;
- `vad`: the energy voice-activity detector behind `server_vad`;
- `webrtc`: the WebRTC channel (aiortc), loaded only when a WebRTC offer arrives.

The WebSocket and WebRTC routes stay with every other family's router in gwlab/local/routes/realtime.py.
The pure rules (event shapes, session validation, limits) are in gwlab/wire/realtime/session.py, shared with
the client.
"""
