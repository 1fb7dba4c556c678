"""The language-model adapter: the OpenAI-compatible client (openai.py) with its error
table (errors.py), voice-note transcription and the probe `doctor` and `init` use; the
core sees only its port."""
