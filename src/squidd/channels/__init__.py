"""The channels, one subpackage each (matrix, email, api): a channel imports no store,
gateway, command or other channel, and is built only when enabled, through the registry in
gateway/channels.py (importing this package starts nothing)."""
