"""Loopback servers that both the benchmarks and the tests start: a fixed-latency gateway, a dask cluster
of separate processes, PostgreSQL, and the few primitives under them (a free port, a bounded wait).

They live under bench/ because bench imports no test module; the tests reach them through
`tests.support`, so each server is started one way in the whole repository.
"""
