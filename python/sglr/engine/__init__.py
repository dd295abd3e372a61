"""The serving runtime: KV slot ownership, prefix cache, scheduler loop and `Engine`."""
