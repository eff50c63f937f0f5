"""Image-generation tasks: the `IMAGES` description, the create body, its sizes and variants.

The spec leaves image task APIs open. gwlab's shape is OpenAI's task shape (the videos API of
protocols.md §8, with the `POST .../cancel` of OpenAI's batches and background responses) applied to
images under `/images/tasks`: the official openai SDK is the spec's first compatibility target, its
status values are the ones asked for (queued, in_progress, completed, failed, cancelled), and a
client that speaks videos speaks this (docs/guide/tasks.md says why in full). Sizes are OpenAI's
image sizes.
"""

from __future__ import annotations

from typing import Any

from gwlab.wire.jobs import tasks
from gwlab.wire.limits import TASK_CANCELLED_STATUSES

__all__ = ["IMAGES", "IMAGE_SIZES", "IMAGE_VARIANTS", "build_create"]

IMAGE_SIZES = ("256x256", "512x512", "1024x1024", "1024x1536", "1536x1024")
IMAGE_VARIANTS = ("image", "thumbnail")  # image/png each; the thumbnail is at most 256 px wide
IMAGE_ID_PREFIX = "imgtask_"

IMAGES = tasks.TaskFamily(
    name="images", submit_path="/images/tasks", item_path="/images/tasks/{task_id}",
    content_path="/images/tasks/{task_id}/content", variants=IMAGE_VARIANTS, thumbnail_variant="thumbnail",
    list_path="/images/tasks", cancel_path="/images/tasks/{task_id}/cancel",
    delete_path="/images/tasks/{task_id}", cancelled=TASK_CANCELLED_STATUSES)


def build_create(prompt: str, model: str, size: str | None = None, **extra: Any) -> dict[str, Any]:
    """The body of `POST /images/tasks`; refused here, naming the field, before anything is billed."""
    if size is not None:
        tasks.one_of(size, IMAGE_SIZES, "size")
    return tasks.build_submit(IMAGES, prompt, model, {"size": size, **extra})
