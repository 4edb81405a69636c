"""The model port: an OpenAI-compatible client, its errors, and the demo provider."""
