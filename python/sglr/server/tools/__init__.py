"""OpenAI tool calling on /v1/chat/completions: request fields, the model's call format,
parsing replies into `tool_calls`, and the regex that forces a call when one is required."""
