"""Model definitions, checkpoint loading and the tiny-model factory (torch imported lazily)."""
