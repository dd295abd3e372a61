"""SGLang's native API: `POST /generate` (`generate.py`) and the routes that run the server
rather than generate (`control.py`: health, model and server info, cache flush, abort)."""
