"""The OpenAI-compatible API: `/v1/chat/completions` (`chat.py`, its messages in `messages.py`),
`/v1/completions` (`completions.py`), `/v1/models` (`models.py`); what they share, the request
and response types, in `protocol.py`, and the sampling fields in `sampling.py`."""
