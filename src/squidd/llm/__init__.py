"""The language-model adapter: the OpenAI-compatible client (openai.py) with its error
table (errors.py), voice-note transcription, the probe `doctor` and `init` use, and what a
local model server (Ollama, llama.cpp, vLLM) really serves (local.py); the core sees only
its port."""
