"""SAS verification of the people the bot serves (matrix-nio answers none): `sas` (one
exchange, the spec's strings over vodozemac's crypto) and `flows` (the requests, to-device
and in a room, the operator's confirmation, the outcome), `signing` (the bot's cross-signing
identity as a verification needs it: its master key, theirs, and the signature of theirs).
"""
