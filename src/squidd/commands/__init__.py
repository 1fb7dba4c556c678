"""One module per CLI command (`run`, `chat`, `cron`, `config check`, `init`, `status`).

`squidd.cli` parses the arguments and calls the command's function; nothing else imports
this package.
"""
