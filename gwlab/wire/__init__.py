"""Protocol facts of the gateway spec: shapes, enums, limits, validation, SSE decoding. No I/O."""
