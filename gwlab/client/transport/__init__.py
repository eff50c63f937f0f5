"""The HTTP transport: requests, retries and error replies, the transport choice and the fast HTTP/1.1 path."""
