"""The scheduler and the model in worker processes, one per tensor-parallel rank.

The caller's process (the front: the language, or the HTTP server) keeps tokenization, result
assembly and streaming; `WorkerScheduler` (`client.py`) starts the workers and stands in for the
in-process `SchedulerLoop`. Rank 0 runs the `SchedulerLoop` (`process.py`); every rank runs the
model on its shard. Control messages travel over pyzmq (`ipc.py`); tensors only through
torch.distributed.
"""
