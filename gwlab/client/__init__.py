"""The client layer: wire + httpx. `transport/` (auth, retries, errors, ledger), `loop` (the private
loop thread), `gateway` (AsyncGateway; Gateway), and one module per protocol family."""
