"""A worker process: the model on one tensor-parallel rank, and on rank 0 the scheduler loop.

Rank 0 serves the front: it reads control messages (new requests, aborts, cache flushes,
stats, stop), runs the `SchedulerLoop`, and sends every step's `TokenOutput`s as one message.
Other ranks follow rank 0's batches (`ModelRunner.follow`). A worker dies with its parent
(`orphans.die_with_parent`) and ignores Ctrl-C, which is the front's to handle.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

import zmq

from sglr.engine.startup_heap import freeze_startup_heap
from sglr.engine.token_output import TokenOutput
from sglr.engine.worker import messages
from sglr.engine.worker.ipc import Receiver, Sender
from sglr.engine.worker.orphans import die_with_parent
from sglr.engine.worker.runner_info import RunnerInfo
from sglr.engine.worker.spec import WorkerSpec
from sglr.errors import SglrError

if TYPE_CHECKING:
    from sglr.engine.scheduler.loop import SchedulerLoop

logger = logging.getLogger("sglr.worker")

_BEAT_S = 1.0
_LINGER_S = 2.0  # how long a last message may take to leave before the process exits


class OutputBatcher:
    """The sink of every request on rank 0: a step's outputs leave as one message."""

    def __init__(self, sender: Sender) -> None:
        self._sender = sender
        self._outputs: list[TokenOutput] = []

    def push(self, out: TokenOutput) -> None:
        self._outputs.append(out)

    def flush(self) -> None:
        if self._outputs:
            outputs, self._outputs = self._outputs, []
            self._sender.send(messages.Outputs(outputs))


def run_worker(spec: WorkerSpec) -> None:
    """The worker process's entry point."""
    die_with_parent(spec.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=getattr(logging, spec.engine_config.log_level.upper(), logging.INFO))
    context = zmq.Context()
    outputs = Sender(context, spec.outputs_endpoint, bind=False) if spec.rank == 0 else None
    try:
        runner = _load_runner(spec)
        if outputs is None:
            from sglr.engine.kv.open_tiers import open_tier_follower

            follower_tier = open_tier_follower(spec.engine_config, runner)
            freeze_startup_heap()
            runner.follow()
            if follower_tier is not None:
                follower_tier.close()
        else:
            _serve(spec, context, runner, outputs)
    except BaseException as exc:
        if isinstance(exc, SglrError) and isinstance(exc, ValueError):
            # A user's mistake (a bad LoRA adapter, an unusable checkpoint): the message says
            # what is wrong, a traceback would bury it.
            logger.error("worker rank %d failed: %s: %s", spec.rank, type(exc).__name__, exc)
        else:
            logger.error("worker rank %d failed:\n%s", spec.rank, traceback.format_exc())
        try:
            if outputs is not None:
                outputs.send(messages.Failed(f"{type(exc).__name__}: {exc}"))
                outputs.close(linger_s=_LINGER_S)
            # The context's I/O thread sends what is queued only until the process exits: wait
            # for it, or the front learns only an exit code instead of the reason.
            context.destroy(linger=int(_LINGER_S * 1000))
        finally:
            os._exit(1)
    if outputs is not None:
        outputs.close(linger_s=_LINGER_S)
    os._exit(0)


def _load_runner(spec: WorkerSpec) -> Any:
    """This rank's runner: its device (GPU `base_gpu_id + rank`), its tensor-parallel group."""
    import dataclasses

    import torch

    from sglr.model.parallel import init_tensor_parallel
    from sglr.model.runner import ModelRunner, resolve_device

    torch.set_num_threads(spec.num_threads)
    config = spec.runner_config
    device = resolve_device(config.device)
    if device.type == "cuda":
        local_rank = spec.rank % spec.engine_config.ranks_per_node
        device = torch.device("cuda", spec.engine_config.base_gpu_id + local_rank)
        torch.cuda.set_device(device)
        config = dataclasses.replace(config, device=str(device))
    tp = None
    if spec.tp_size > 1:
        assert spec.dist_init_method is not None
        tp = init_tensor_parallel(spec.rank, spec.tp_size, spec.dist_init_method, device)
    return ModelRunner(config, tp)


def _serve(spec: WorkerSpec, context: zmq.Context[Any], runner: Any, outputs: Sender) -> None:
    from sglr.engine.scheduler.loop import SchedulerLoop
    from sglr.engine.tokenizer import EngineTokenizer

    batcher = OutputBatcher(outputs)
    loop = SchedulerLoop(
        spec.engine_config,
        runner,
        EngineTokenizer(runner.model_dir, spec.engine_config.chat_template),
        max_running_requests=spec.max_running_requests,
        chunked_prefill_size=spec.chunked_prefill_size,
        after_iteration=batcher.flush,
    )
    loop.start()
    commands = Receiver(context, spec.commands_endpoint, bind=False)
    freeze_startup_heap()
    outputs.send(messages.Ready(RunnerInfo.of(runner)))
    last_beat = 0.0
    while True:
        message = commands.receive(_BEAT_S)
        if time.monotonic() - last_beat >= _BEAT_S:
            outputs.send(messages.Heartbeat(loop.stats.num_steps, loop.has_work))
            last_beat = time.monotonic()
        if message is None:
            if not loop.is_alive:
                raise RuntimeError(f"the scheduler loop stopped: {loop.fatal_error}")
            continue
        if not _handle_command(message, loop, batcher, outputs):
            if spec.tp_size > 1:
                runner.stop_followers()
            outputs.send(messages.Stopped())
            return


def _handle_command(
    message: messages.Command, loop: SchedulerLoop, batcher: OutputBatcher, outputs: Sender
) -> bool:
    """The one place the front's commands are read; False once asked to stop (the loop has
    stopped). A query's answer leaves as a `Reply` when the loop thread has it."""

    def reply_to(token: int) -> Any:
        def reply(future: Any) -> None:
            error = future.exception()
            outputs.send(messages.Reply(token, error if error is not None else future.result()))

        return reply

    match message:
        case messages.AddRequest(request):
            loop.submit(request, batcher)
        case messages.AbortRequest(rid):
            loop.abort(rid)
        case messages.FlushCache(token):
            loop.flush_cache().add_done_callback(reply_to(token))
        case messages.LoadLora(token, lora_id, name, path):
            loop.load_lora(lora_id, name, path).add_done_callback(reply_to(token))
        case messages.UnloadLora(token, lora_id):
            loop.unload_lora(lora_id).add_done_callback(reply_to(token))
        case messages.OpenSession(token, session_id):
            loop.open_session(session_id).add_done_callback(reply_to(token))
        case messages.CloseSession(token, session_id):
            loop.close_session(session_id).add_done_callback(reply_to(token))
        case messages.GetStats(token):
            loop.call(loop.get_stats).add_done_callback(reply_to(token))
        case messages.GetTreeSummary(token, limits):
            # Off the loop thread, so a poll never waits for a step (the Rust tree locks itself).
            try:
                summary: Any = loop.get_tree_summary(limits)
            except Exception as error:  # the asker's error, never this worker's end
                summary = error
            outputs.send(messages.Reply(token, summary))
        case messages.GetWaitingQueue(token, limit):
            loop.get_waiting_queue(limit).add_done_callback(reply_to(token))
        case messages.CheckInvariants(token):
            loop.call(loop.check_invariants).add_done_callback(reply_to(token))
        case messages.StopWorkers():
            loop.stop()
            return False
        case messages.Query(token):  # a query this rank does not know: an error back, never a hang
            outputs.send(messages.Reply(token, ValueError(f"unknown command {type(message).__name__}")))
    return True


if __name__ == "__main__":
    # Started by `WorkerScheduler` as `python -m sglr.engine.worker.process`, the spec pickled on
    # stdin: a fresh interpreter that never re-imports the caller's main module.
    run_worker(pickle.load(sys.stdin.buffer))
