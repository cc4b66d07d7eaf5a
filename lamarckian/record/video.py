"""Videos of matches: frames (``(H, W, 3)`` uint8 RGB) written as an H.264 mp4 (PyAV) or an animated GIF (Pillow),
with text drawn over them.

The mp4 plays in browsers and common players (H.264, yuv420p, even width and height); the GIF loops, for READMEs.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, Sequence

import numpy as np

FORMATS = (".mp4", ".gif")
MAX_GIF_FRAMES = 1200  # a GIF is held in memory until it is written: longer games keep their first frames only


def check_video_path(path: Path) -> None:
    """ValueError (one line) unless ``path`` ends in a supported format and its folder exists or can be made."""
    if Path(path).suffix.lower() not in FORMATS:
        raise ValueError(f"--video {path}: the file must end in one of {', '.join(FORMATS)}")
    if Path(path).suffix.lower() == ".mp4":
        try:
            import av  # noqa: F401
        except ImportError:
            raise ValueError(f"--video {path}: writing mp4 needs PyAV (pip install av); a .gif needs only Pillow") \
                from None


class VideoWriter:
    """Write frames to ``path`` at ``fps`` frames per second (format by suffix: ``.mp4`` or ``.gif``).

    Use as a context manager; :attr:`frames` counts what was written. A GIF keeps at most ``MAX_GIF_FRAMES``
    (:attr:`dropped` counts the rest; an mp4 has no limit).
    """

    def __init__(self, path: Path, fps: float = 30.0) -> None:
        check_video_path(path)
        self.path, self.fps = Path(path), float(fps)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.frames = self.dropped = 0
        self._gif: list[np.ndarray] = []
        self._container: Any = None      # av's container and stream, from the first mp4 frame on
        self._stream: Any = None

    def __enter__(self) -> "VideoWriter":
        return self

    def write(self, frame: np.ndarray) -> None:
        """One RGB frame ``(H, W, 3)`` uint8; every frame of a video has the first one's size."""
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        if frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"a video frame is (height, width, 3) RGB, got shape {frame.shape}")
        if self.path.suffix.lower() == ".gif":
            if len(self._gif) >= MAX_GIF_FRAMES:
                self.dropped += 1
                return
            self._gif.append(frame)
        else:
            self._write_mp4(frame)
        self.frames += 1

    def _write_mp4(self, frame: np.ndarray) -> None:
        import av

        height, width = frame.shape[0] // 2 * 2, frame.shape[1] // 2 * 2   # yuv420p wants even sizes
        if self._container is None:
            self._container = av.open(str(self.path), mode="w")
            self._stream = self._container.add_stream("libx264", rate=round(self.fps))
            self._stream.width, self._stream.height, self._stream.pix_fmt = width, height, "yuv420p"
            self._stream.options = {"crf": "23", "preset": "medium"}
        picture = av.VideoFrame.from_ndarray(frame[:height, :width], format="rgb24")
        for packet in self._stream.encode(picture):
            self._container.mux(packet)

    def close(self) -> None:
        """Finish the file (an mp4's encoder is flushed; a GIF is written in one go, looping forever)."""
        if self._container is not None:
            for packet in self._stream.encode():
                self._container.mux(packet)
            self._container.close()
            self._container = None
        if self._gif:
            from PIL import Image

            images = [Image.fromarray(frame) for frame in self._gif]
            # a GIF times frames in centiseconds: frame i ends at (i + 1) / fps rounded to 10 ms, so 30 fps plays
            # 30, 30, 40 ms... and the whole GIF lasts what the game did (not 10% less)
            ends = [round((index + 1) * 100 / self.fps) * 10 for index in range(len(images))]
            durations = [end - start for start, end in zip([0] + ends[:-1], ends)]
            images[0].save(self.path, save_all=True, append_images=images[1:], loop=0, duration=durations,
                           optimize=True)
            self._gif = []

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def overlay(frame: np.ndarray, lines: Sequence[tuple[str, tuple[int, int, int]]], corner: str = "top") -> np.ndarray:
    """``frame`` with ``lines`` of (text, RGB colour) drawn on a dark band at its ``top`` or ``bottom``."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8))
    draw = ImageDraw.Draw(image)
    line_height = 12
    band = line_height * len(lines) + 6
    top = 0 if corner == "top" else image.height - band
    draw.rectangle((0, top, image.width, top + band), fill=(20, 20, 20))
    for index, (text, colour) in enumerate(lines):
        draw.text((5, top + 3 + index * line_height), text, fill=colour)
    return np.asarray(image)
