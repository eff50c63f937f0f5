"""Realtime wire facts, pure: the session configuration and client events, typed server events, audio."""
