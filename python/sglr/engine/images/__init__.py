"""Images in requests: reading them (`loading.py`), their prefix-cache keys (`cache_keys.py`) and
placing them in the prompt (`prompt.py`)."""
