"""Views of an env without a viewer of its own (gymnax's): its observation array as text, and an
image observation [H, W, C] (MinAtar) as an RGB frame, a colour per channel. numpy only."""

from __future__ import annotations

import numpy as np

# One colour per channel (cycled); a cell takes the colour of its first non-zero channel.
PALETTE = np.array([[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40],
                    [148, 103, 189], [140, 86, 75], [227, 119, 194], [127, 127, 127],
                    [188, 189, 34], [23, 190, 207]], np.uint8)
BACKGROUND = np.array([16, 16, 16], np.uint8)
CELL_PIXELS = 24


def first_channel(obs: np.ndarray) -> np.ndarray:
    """i32[H, W]: the first channel that is non-zero in each cell, -1 where none is."""
    on = np.asarray(obs) != 0
    return np.where(on.any(-1), np.argmax(on, -1), -1)


def observation_text(obs) -> str:
    """An image as a grid of letters (channel 0 = a, 1 = b, ...; "." empty); anything else as
    its numbers."""
    obs = np.asarray(obs)
    if obs.ndim == 3:
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        channel = first_channel(obs)
        return "\n".join("".join("." if c < 0 else letters[c % 26] for c in row)
                         for row in channel)
    return np.array2string(obs, precision=3, suppress_small=True, max_line_width=100)


def observation_image(obs) -> np.ndarray:
    """u8[H * CELL_PIXELS, W * CELL_PIXELS, 3] of an image observation."""
    channel = first_channel(np.asarray(obs))
    colours = np.where(channel[..., None] < 0, BACKGROUND,
                       PALETTE[np.maximum(channel, 0) % len(PALETTE)])
    return np.repeat(np.repeat(colours, CELL_PIXELS, axis=0), CELL_PIXELS, axis=1)
