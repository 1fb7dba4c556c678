"""squidd: a personal AI assistant daemon (Matrix, email, cron, heartbeat) with durable memory."""

__version__ = "0.1.0"
