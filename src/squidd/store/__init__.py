"""The stores on disk: one module per kind of state (sessions, handled ids, outbox,
journals, attempts, parked items, ...), each implementing a port of the core; built once,
by the composition root."""
