"""OpenAI's Files and Batch APIs: JSONL files of requests run in the background through the
same handlers as live requests, at a bounded concurrency and a low priority (docs/batches.md)."""
