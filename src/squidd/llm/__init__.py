"""The language-model adapter: the chain of providers the core sees as its port (chain.py,
each provider's keys and circuit breaker in breaker.py), one request to an OpenAI-compatible
endpoint (openai.py) with its error table (errors.py), voice-note transcription, the probe
`doctor` and `init` use, and what a local model server (Ollama, llama.cpp, vLLM) really
serves (local.py)."""
