"""The daemon's wiring: the `Daemon`, channel construction, per-turn tools and reply
addresses, scheduled runs, the status server and sd_notify. Everything here composes the
core with the adapters; nothing in the core or an adapter imports it."""
