"""`StaticPrompt`: a fixed base prompt, the `PromptSource` unit tests hand the agent loop
(production builds its prompt from the workspace files, `squidd.workspace.WorkspacePrompt`)."""

from __future__ import annotations


class StaticPrompt:
    def __init__(self, text: str) -> None:
        self._text = text

    async def system_prompt(self) -> str:
        return self._text

    def invalidate(self) -> None:
        return None
