"""OpenAI's Responses API (`/v1/responses`) on the chat path: `request.py` turns a request into
the chat request it amounts to (`items.py`: its input items as chat messages), `output.py` makes
the Responses object, `events.py` the streamed events, `store.py` keeps stored responses, and
`routes.py` has the handlers."""
