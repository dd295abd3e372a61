"""The scheduler: the loop thread that owns every request in flight and the engine's KV memory.

`loop.py` (`SchedulerLoop`) drives each step; each collection has one owner that alone changes
it: `table.py` (the requests in flight and their phases), `prefill.py` (the waiting queue and
admission), `running.py` (the decoding requests and retraction), with `endings.py` (how a
request ends) and `results.py` (applying a forward pass's outputs). `handle.py` declares what
the engine's front sees of a scheduler; `messages.py` the loop's inbox.
"""
