"""Pure logic of squidd: agent loop, memory, routing, scheduling.

Nothing under `squidd.core` imports an adapter (`squidd.llm`, `squidd.store`,
`squidd.channels`, `squidd.tools`); adapters are handed in through the ports.
"""
