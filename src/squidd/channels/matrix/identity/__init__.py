"""Cross-signing for the bot's Matrix account, which matrix-nio does not implement.

Current Element clients share room keys only with devices their owner cross-signed, and
hide what unsigned devices send. Modules: `signed_json` (canonical JSON, Ed25519
signatures), `cross_signing` (the three keys, upload bodies, checks of a published
identity and its devices), `secret_storage` (the keys encrypted in account data, the
recovery key), `api` (the HTTP calls nio does not make), `local` (the files in the data
dir), `account` (the bot's own identity: created once, kept, restored, signing each new
device), `trust` (allowed users' identities pinned, their signed devices), `gate` (all of it
for one connection, and whether a message may be acted on).
"""
