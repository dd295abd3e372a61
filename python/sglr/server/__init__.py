"""HTTP server: SGLang-native and OpenAI-compatible routes over the engine."""
