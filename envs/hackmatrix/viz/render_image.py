"""Raster frames (PIL) of a ``render.frame_view`` dict, for GIF / MP4 replays.

Every frame has the same fixed size (``FRAME_SIZE``, multiples of 16 as video encoders want),
so a list of frames stacks into a video without resizing. Host-side only; no display needed.

Layout: the header line on top, the 6x6 board on the left (row 5 at the top, as on the
screen), a side panel with the action, value, reward components and the policy's top actions.
Each cell draws the parts of its token (``render.token_parts``): a block fills the cell, the
player is a yellow disc, enemies are listed at the top right in type colours, transmissions at
the bottom right, resources at the bottom left, a cryptog hint at the top left. Parts hidden
from the agent (shown only when the frame was built with ``reveal``) are drawn in grey. With a
policy, the probabilities of the four directions are written on the player's neighbours.
"""

import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..core.constants import DIR_DCOL, DIR_DROW, GRID

CELL = 64
BOARD_ORIGIN = (16, 56)
PANEL_X = BOARD_ORIGIN[0] + GRID * CELL + 24
FRAME_SIZE = (832, 480)  # (width, height)

BACKGROUND = (18, 20, 28)
FLOOR = (34, 38, 52)
GRID_LINE = (60, 66, 84)
TEXT = (225, 228, 236)
DIM = (120, 124, 138)
HIDDEN = (110, 110, 110)
COLOURS = {
    "player": (250, 210, 60), "exit": (70, 200, 110), "siphon": (70, 210, 230),
    "block": (52, 84, 150), "question": (128, 80, 160), "siphoned": (44, 52, 72),
    "centre": (160, 160, 175), "credits": (235, 190, 70), "energy": (90, 200, 235),
    "virus": (235, 80, 80), "daemon": (200, 60, 40), "glitch": (220, 90, 220),
    "cryptog": (240, 160, 60), "transmission": (200, 110, 220), "hint": (190, 140, 70),
    "plain": TEXT,
}


@functools.lru_cache(maxsize=8)
def _font(size: int):
    return ImageFont.load_default(size=size)


def _colour(style: str):
    return HIDDEN if style.startswith("hidden-") else COLOURS.get(style, TEXT)


def _cell_box(row: int, col: int):
    x0 = BOARD_ORIGIN[0] + col * CELL
    y0 = BOARD_ORIGIN[1] + (GRID - 1 - row) * CELL
    return x0, y0, x0 + CELL, y0 + CELL


def _draw_cell(draw: ImageDraw.ImageDraw, cell: dict):
    x0, y0, x1, y1 = _cell_box(cell["row"], cell["col"])
    small, tiny = _font(13), _font(11)
    fill = COLOURS["siphoned"] if cell["siphoned"] else FLOOR
    block = cell["block"]
    if block is not None:
        fill = COLOURS["question" if block["type"] == "question" else "block"]
    draw.rectangle((x0, y0, x1, y1), fill=fill, outline=GRID_LINE)
    if cell["exit"]:
        draw.rectangle((x0 + 2, y0 + 2, x1 - 2, y1 - 2), outline=COLOURS["exit"], width=3)
        draw.text((x0 + CELL // 2, y0 + CELL // 2), "EXIT", fill=COLOURS["exit"], font=small,
                  anchor="mm")
    if cell["data_siphon"]:
        draw.text((x0 + CELL // 2, y0 + CELL // 2), "S", fill=COLOURS["siphon"], font=_font(22),
                  anchor="mm")
    if block is not None:
        if block["type"] == "question":
            draw.text((x0 + CELL // 2, y0 + 22), "?", fill=TEXT, font=_font(20), anchor="mm")
        if block["spawn"] is not None:
            body = f"{(block['program'] or '').upper() or block['points']}/{block['spawn']}"
            colour = HIDDEN if block["type"] == "question" else TEXT
            draw.text((x0 + CELL // 2, y0 + 42), body if block["type"] != "question"
                      else f"({body})", fill=colour, font=small, anchor="mm")
    if cell["siphon_center"]:
        draw.ellipse((x0 + 4, y1 - 12, x0 + 10, y1 - 6), fill=COLOURS["centre"])
    if cell["player"]:
        cx, cy = x0 + CELL // 2, y0 + CELL // 2
        draw.ellipse((cx - 14, cy - 14, cx + 14, cy + 14), fill=COLOURS["player"])
        draw.text((cx, cy), "@", fill=BACKGROUND, font=_font(18), anchor="mm")
    # The remaining parts come from the shared token so that hidden parts keep their marking.
    parts = {"enemy": [], "transmission": [], "resource": [], "hint": []}
    for text, style in cell["parts"]:
        base = style.removeprefix("hidden-")
        if base in ("virus", "daemon", "glitch", "cryptog"):
            parts["enemy"].append((text, style))
        elif base == "transmission":
            parts["transmission"].append((text, style))
        elif base in ("credits", "energy"):
            parts["resource"].append((text, style))
        elif base == "hint":
            parts["hint"].append((text, style))
    for i, (text, style) in enumerate(parts["enemy"][:4]):
        draw.text((x1 - 3, y0 + 3 + 13 * i), text, fill=_colour(style), font=small, anchor="ra")
    for i, (text, style) in enumerate(parts["transmission"][:2]):
        draw.text((x1 - 3, y1 - 3 - 12 * i), text, fill=_colour(style), font=tiny, anchor="rd")
    for text, style in parts["resource"]:
        draw.text((x0 + 3, y1 - 3), text, fill=_colour(style), font=small, anchor="ld")
    for text, style in parts["hint"]:
        draw.text((x0 + 3, y0 + 3), text, fill=_colour(style), font=small, anchor="la")


def _draw_direction_probs(draw: ImageDraw.ImageDraw, frame: dict):
    policy = frame.get("policy")
    if not policy or not policy.get("directions"):
        return
    player = next(c for c in frame["cells"] if c["player"])
    for d, prob in enumerate(policy["directions"]):
        row, col = player["row"] + int(DIR_DROW[d]), player["col"] + int(DIR_DCOL[d])
        if prob <= 0 or not (0 <= row < GRID and 0 <= col < GRID):
            continue
        x0, y0, x1, y1 = _cell_box(row, col)
        label = f"{100 * prob:.0f}%"
        box = draw.textbbox((x0 + CELL // 2, y0 + CELL // 2), label, font=_font(12), anchor="mm")
        draw.rectangle((box[0] - 2, box[1] - 1, box[2] + 2, box[3] + 1), fill=(0, 0, 0))
        draw.text((x0 + CELL // 2, y0 + CELL // 2), label, fill=COLOURS["player"],
                  font=_font(12), anchor="mm")


def _panel_lines(frame: dict) -> list:
    """(text, colour) lines of the side panel."""
    lines = []
    step = frame.get("step")
    if frame.get("action") is not None:
        lines.append((f"step {step}: {frame['action']['name']}" if step is not None
                      else frame["action"]["name"], COLOURS["player"]))
    elif step is not None:
        lines.append((f"step {step}", TEXT))
    policy = frame.get("policy")
    if policy is not None and policy.get("value") is not None:
        lines.append((f"value {policy['value']:+.3f}", TEXT))
    reward = frame.get("reward")
    if reward is not None:
        lines.append((f"reward {reward['total']:+.4f}", TEXT))
        lines += [(f"  {name} {value:+.4f}", DIM) for name, value in reward["components"].items()]
    if frame.get("outcome"):
        lines.append((f"episode over: {frame['outcome']}", COLOURS["virus"]))
    programs = frame.get("programs") or []
    if programs:
        lines.append(("programs: " + " ".join(p["name"] for p in programs), DIM))
    return lines


def render_image(frame: dict) -> Image.Image:
    """The RGB ``FRAME_SIZE`` image of one ``frame_view`` dict."""
    image = Image.new("RGB", FRAME_SIZE, BACKGROUND)
    draw = ImageDraw.Draw(image)
    h = frame["header"]
    draw.text((16, 10), f"stage {h['stage']}  turn {h['turn']}  HP {h['hp']}  credits "
              f"{h['credits']}  energy {h['energy']}  siphons {h['siphons']}  score {h['score']}",
              fill=TEXT, font=_font(16))
    flags = [name for name in ("show", "calm", "step") if h[name]]
    if frame.get("reveal"):
        flags.append("REVEALED")
    if flags:
        draw.text((16, 32), " ".join(flags), fill=DIM, font=_font(12))
    for cell in frame["cells"]:
        _draw_cell(draw, cell)
    _draw_direction_probs(draw, frame)
    y = BOARD_ORIGIN[1]
    for text, colour in _panel_lines(frame):
        draw.text((PANEL_X, y), text, fill=colour, font=_font(14))
        y += 19
    policy = frame.get("policy")
    if policy is not None and policy.get("top"):
        y += 6
        draw.text((PANEL_X, y), "policy", fill=TEXT, font=_font(14))
        y += 20
        bar_width = FRAME_SIZE[0] - PANEL_X - 150
        for entry in policy["top"]:
            draw.text((PANEL_X, y), entry["name"][:12], fill=TEXT, font=_font(13))
            draw.rectangle((PANEL_X + 100, y + 2, PANEL_X + 100 + int(bar_width * entry["prob"]),
                            y + 14), fill=COLOURS["siphon"])
            draw.text((FRAME_SIZE[0] - 12, y), f"{100 * entry['prob']:.1f}%", fill=TEXT,
                      font=_font(13), anchor="ra")
            y += 18
    return image


def render_array(frame: dict) -> np.ndarray:
    """``render_image`` as a uint8[H, W, 3] array (what imageio writes)."""
    return np.asarray(render_image(frame))
