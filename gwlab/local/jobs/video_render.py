"""The preview renderer behind `local/video-preview`: NOT a generative video model.

It draws the prompt, a moving dot and a frame counter with Pillow and encodes them to a real H.264
MP4 with PyAV, plus a PNG thumbnail and a PNG spritesheet. That is enough to exercise an
asynchronous task API end to end (submit, poll, download, delete) with files every player opens,
without pretending to generate anything from the prompt's meaning."""

from __future__ import annotations

import hashlib
import io
import itertools
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType

from PIL import Image, ImageDraw, ImageFont

from gwlab.local.jobs.task_worker import Cancelled, RendererUnavailable

FPS = 8  # a preview: few frames keep a 12 s clip at 1792x1024 quick to encode on two cores
STEPS = 10  # progress is reported in this many steps (10 %, 20 %, ... 100 %)
SPRITE_COLUMNS, SPRITE_WIDTH = 4, 160
BANNER = "gwlab local PREVIEW renderer - not a generative video model"


@dataclass(frozen=True, slots=True)
class PreviewSpec:
    prompt: str
    width: int
    height: int
    seconds: int
    backdrop: bytes | None = None  # an input_reference image, drawn behind the text

    @property
    def frame_count(self) -> int:
        return self.seconds * FPS


@dataclass(slots=True)
class RenderedVideo:
    video: bytes  # video/mp4, H.264
    thumbnail: bytes  # image/png, the middle frame
    spritesheet: bytes  # image/png, one tile per second
    frames: int = 0


@dataclass(slots=True)
class _Painter:
    """Draws frame `i` of a spec; fonts and the backdrop are prepared once."""

    spec: PreviewSpec
    base: Image.Image = field(init=False)
    lines: list[str] = field(init=False)
    big: ImageFont.FreeTypeFont | ImageFont.ImageFont = field(init=False)
    small: ImageFont.FreeTypeFont | ImageFont.ImageFont = field(init=False)

    def __post_init__(self) -> None:
        w, h = self.spec.width, self.spec.height
        digest = hashlib.sha256(self.spec.prompt.encode()).digest()  # same prompt, same colours
        top, bottom = digest[:3], digest[3:6]
        self.base = _backdrop(self.spec.backdrop, w, h) or gradient(w, h, top, bottom)
        size = max(18, min(w, h) // 16)
        self.big = ImageFont.load_default(size=size)
        self.small = ImageFont.load_default(size=max(12, size // 2))
        chars = max(8, int(w * 0.85 / (size * 0.55)))
        self.lines = textwrap.wrap(self.spec.prompt, chars)[:8] or [""]

    def frame(self, i: int) -> Image.Image:
        w, h = self.spec.width, self.spec.height
        image = self.base.copy()
        draw = ImageDraw.Draw(image)
        draw.text((w // 2, h // 12), BANNER, font=self.small, fill="white", anchor="mm",
                  stroke_width=2, stroke_fill="black")
        line_h = int(self.big.size * 1.3) if hasattr(self.big, "size") else 24
        y = h // 2 - line_h * len(self.lines) // 2
        for line in self.lines:
            draw.text((w // 2, y), line, font=self.big, fill="white", anchor="mt", stroke_width=3,
                      stroke_fill="black")
            y += line_h
        t = i / max(1, self.spec.frame_count - 1)  # the moving element: a dot crossing the lower third
        r = max(8, min(w, h) // 20)
        cx, cy = int(r + t * (w - 2 * r)), int(h * 0.75)
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=(255, 200, 40), outline="black", width=3)
        counter = f"frame {i + 1}/{self.spec.frame_count}  {i / FPS:0.2f} s"
        draw.text((w // 2, h - h // 12), counter, font=self.small, fill="white", anchor="mm",
                  stroke_width=2, stroke_fill="black")
        return image


def gradient(w: int, h: int, top: bytes, bottom: bytes) -> Image.Image:
    """A vertical blend of two colours (half brightness, so white text stays readable); the image renderer's too."""
    column = Image.new("RGB", (1, 256))
    column.putdata([tuple(int(a + (b - a) * y / 255) // 2 for a, b in zip(top, bottom, strict=True))
                    for y in range(256)])
    return column.resize((w, h))


def _backdrop(data: bytes | None, w: int, h: int) -> Image.Image | None:
    if not data:
        return None
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB").resize((w, h))


def check_image(data: bytes) -> None:
    """Raise ValueError unless the bytes are an image Pillow can read (for input_reference)."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except Exception as exc:
        raise ValueError(f"not a readable image ({exc})") from None


def png(image: Image.Image) -> bytes:
    """The image as PNG bytes."""
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _load_av() -> ModuleType:
    try:
        import av
    except ImportError as exc:  # pragma: no cover - av is in the `local` extra
        raise RendererUnavailable("the preview renderer needs PyAV: pip install 'gwlab[local]'") from exc
    return av


def _chunks(total: int, steps: int) -> Iterator[range]:
    bounds = [round(total * k / steps) for k in range(steps + 1)]
    for lo, hi in itertools.pairwise(bounds):
        yield range(lo, hi)


def render(spec: PreviewSpec, on_step: Callable[[int], bool] = lambda progress: True) -> RenderedVideo:
    """Render the whole preview; `on_step(progress)` runs after each tenth and returns False to cancel.

    The caller paces the work in `on_step` (the gateway sleeps there), so progress can be polled."""
    av = _load_av()
    painter = _Painter(spec)
    out = io.BytesIO()
    container = av.open(out, mode="w", format="mp4")
    stream = container.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
    stream.width, stream.height, stream.pix_fmt = spec.width, spec.height, "yuv420p"
    middle = spec.frame_count // 2
    tile_size = (SPRITE_WIDTH, max(1, SPRITE_WIDTH * spec.height // spec.width))
    thumb: Image.Image | None = None
    tiles: list[Image.Image] = []
    try:
        for step, frames in enumerate(_chunks(spec.frame_count, STEPS), start=1):
            for i in frames:
                image = painter.frame(i)
                if i == middle:
                    thumb = image
                if i % FPS == 0:
                    tiles.append(image.resize(tile_size))
                for packet in stream.encode(av.VideoFrame.from_image(image)):
                    container.mux(packet)
            if not on_step(min(99, step * 100 // STEPS)):  # 100 only once the files exist
                raise Cancelled()
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    thumbnail = png(thumb or painter.frame(0))
    return RenderedVideo(out.getvalue(), thumbnail, png(_sheet(tiles)), spec.frame_count)


def _sheet(tiles: list[Image.Image]) -> Image.Image:
    tw, th = tiles[0].size
    rows = -(-len(tiles) // SPRITE_COLUMNS)
    sheet = Image.new("RGB", (tw * min(SPRITE_COLUMNS, len(tiles)), th * rows))
    for n, tile in enumerate(tiles):
        sheet.paste(tile, ((n % SPRITE_COLUMNS) * tw, (n // SPRITE_COLUMNS) * th))
    return sheet
