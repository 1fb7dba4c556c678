"""SAS verification of the people the bot serves (matrix-nio's own never sees the events,
see `client.SquiddClient`): `sas` (one exchange, the spec's strings over vodozemac's
crypto), `flow` (one flow), `steps` (which events are steps of which flow), `flows` (the
requests, to-device and in a room, each step checked, the operator's confirmation, the
outcome), `limits` (how much a flood may take), `wire` (the client: own keys, devices,
sending), `kept` (the flows in progress on disk, so a restart ends them cleanly),
`signing` (the bot's cross-signing identity as a verification needs it: its master key,
theirs, and the signature of theirs).
"""
