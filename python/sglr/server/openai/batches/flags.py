"""`sglr-server`'s flags of the Files and Batch APIs, and the server settings they give."""

from __future__ import annotations

import argparse
from typing import Any


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--batch-storage-dir",
        default=None,
        help="where /v1/files and /v1/batches keep files and batch state; a server started on it "
        "resumes its unfinished batches (default: <sglr cache>/batches/<served model name>)",
    )
    add(
        "--batch-max-concurrency",
        type=int,
        default=2,
        help="batch requests running at once, across all batches, beside live traffic (2)",
    )
    add("--batch-max-file-bytes", type=int, default=32 << 20, help="bytes of one uploaded file (32 MiB)")
    add("--batch-max-storage-bytes", type=int, default=1 << 30, help="bytes of all stored files (1 GiB)")


def batch_settings(args: argparse.Namespace) -> dict[str, Any]:
    """`ServerSettings` fields of the flags above."""
    names = ("batch_storage_dir", "batch_max_concurrency", "batch_max_file_bytes", "batch_max_storage_bytes")
    return {name: getattr(args, name) for name in names}
