"""SAS verification of the people the bot serves (matrix-nio answers none): `sas` (one
exchange, the spec's strings over vodozemac's crypto) and `flows` (the requests, to-device
and in a room, the operator's confirmation, the outcome).
"""
