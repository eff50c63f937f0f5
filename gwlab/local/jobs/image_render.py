"""The preview renderer behind `local/image-preview`: NOT a generative image model.

It draws the prompt as text on a gradient chosen by the prompt's hash, under a banner that says what
it is, and saves a PNG plus a PNG thumbnail (at most 256 px wide). That is enough to exercise an image
task API end to end (submit, poll, cancel, download) with files every viewer opens, without
pretending to generate anything from the prompt's meaning. Pillow only.
"""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from gwlab.local.jobs.task_worker import Cancelled
from gwlab.local.jobs.video_render import gradient, png

BANNER = "gwlab local PREVIEW renderer - not a generative image model"
STEPS = 5  # progress is reported in this many steps, so a poller sees the task run
THUMBNAIL_WIDTH = 256


@dataclass(frozen=True, slots=True)
class RenderedImage:
    image: bytes  # image/png
    thumbnail: bytes  # image/png


def render(prompt: str, width: int, height: int,
           on_step: Callable[[int], bool] = lambda progress: True) -> RenderedImage:
    """Draw the preview; `on_step(progress)` runs after each step and returns False to cancel."""
    digest = hashlib.sha256(prompt.encode()).digest()  # same prompt, same colours
    image = gradient(width, height, digest[:3], digest[3:6])
    draw = ImageDraw.Draw(image)
    size = max(16, min(width, height) // 14)
    big, small = ImageFont.load_default(size=size), ImageFont.load_default(size=max(10, size // 2))
    lines = textwrap.wrap(prompt, max(8, int(width * 0.85 / (size * 0.55))))[:8] or [""]
    line_h = int(size * 1.3)
    y = height // 2 - line_h * len(lines) // 2
    for step in range(1, STEPS + 1):
        if step == 1:
            draw.text((width // 2, height // 12), BANNER, font=small, fill="white", anchor="mm",
                      stroke_width=2, stroke_fill="black")
        elif step == 2:
            for line in lines:
                draw.text((width // 2, y), line, font=big, fill="white", anchor="mt", stroke_width=3,
                          stroke_fill="black")
                y += line_h
        elif step == 3:
            r = max(6, min(width, height) // 24)  # a corner mark: the image is drawn, not generated
            draw.ellipse((width - 3 * r, height - 3 * r, width - r, height - r), fill=(255, 200, 40),
                         outline="black", width=2)
        if not on_step(min(99, step * 100 // STEPS)):  # 100 only once the files exist
            raise Cancelled()
    thumb = image.resize((THUMBNAIL_WIDTH, max(1, THUMBNAIL_WIDTH * height // width)), Image.Resampling.LANCZOS) \
        if width > THUMBNAIL_WIDTH else image
    return RenderedImage(png(image), png(thumb))
