"""A self-contained HTML replay of ``render.frame_view`` frames: one file, inline CSS and JS,
no network access (no external URL anywhere), viewable offline in any browser.

Controls: play/pause (button or Space), a step slider, previous/next (buttons or the Left/Right
arrow keys), Home/End. Each step shows the board (cells coloured by the token styles of
``render.token_parts``; hidden parts greyed), the header values, the action taken, the policy
overlay (direction probabilities on the player's neighbours, the top actions as bars, the
value) and the reward with its non-zero components. An optional summary table (one row per
episode) is shown below.

The visible step counter is the element ``#step-counter`` ("episode E  step S  (frame F / N)"),
and each board cell is ``#cell-<row>-<col>`` with its token in ``data-token``, so a browser test
can check what is displayed.
"""

import html
import json

from ..core.constants import DIR_DCOL, DIR_DROW, GRID

_STYLE = """
body { background:#12141c; color:#e1e4ec; font:14px/1.35 system-ui, sans-serif; margin:16px; }
h1 { font-size:18px; margin:0 0 8px; }
#main { display:flex; gap:24px; align-items:flex-start; }
#board { display:grid; grid-template-columns:repeat(6, 72px); grid-auto-rows:72px; gap:2px;
         background:#3c4254; border:2px solid #3c4254; }
.cell { background:#222634; position:relative; font:12px/1.2 ui-monospace, monospace;
        padding:3px; overflow:hidden; white-space:pre-wrap; word-break:break-all; }
.cell.block { background:#34548f; } .cell.question { background:#80509f; }
.cell.siphoned { outline:2px solid #566080; outline-offset:-4px; }
.cell.exit { box-shadow: inset 0 0 0 3px #46c86e; }
.prob { position:absolute; right:3px; bottom:3px; background:#000; color:#fad23c;
        font-size:11px; padding:0 2px; }
.player { color:#fad23c; font-weight:bold; font-size:16px; } .exit { color:#46c86e; }
.siphon { color:#46d2e6; font-weight:bold; } .block { color:#dfe6ff; } .question { color:#fff; }
.credits { color:#ebbe46; } .energy { color:#5ac8eb; } .virus { color:#ff6b6b; }
.daemon { color:#ff8a5c; } .glitch { color:#f07cf0; } .cryptog { color:#f0a03c; }
.transmission { color:#c86edc; } .hint { color:#be8c46; font-style:italic; }
.siphoned-mark, .centre { color:#a0a0af; } .hidden { color:#8a8a8a; font-style:italic; }
#panel { min-width:320px; } #panel div { margin:2px 0; }
.bar { display:inline-block; height:10px; background:#46d2e6; vertical-align:middle; }
.dim { color:#8a8fa0; } .outcome { color:#ff6b6b; font-weight:bold; }
#controls { margin:10px 0; display:flex; gap:8px; align-items:center; }
#slider { width:420px; }
table { border-collapse:collapse; margin-top:16px; } td, th { border:1px solid #3c4254;
        padding:3px 8px; text-align:right; } th { background:#222634; }
"""

_SCRIPT = """
const FRAMES = JSON.parse(document.getElementById('frames').textContent);
const DIRS = __DIRS__;
let index = 0, timer = null;
const el = id => document.getElementById(id);
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c])); }
function part(p) {
  const hidden = p[1].startsWith('hidden-');
  const cls = (hidden ? 'hidden ' : '') + (p[1] === 'siphoned' ? 'siphoned-mark' : p[1].replace('hidden-', ''));
  return '<span class="' + cls + '">' + esc(p[0]) + '</span>';
}
function draw() {
  const f = FRAMES[index];
  el('step-counter').textContent = 'episode ' + f.episode + '  step ' + f.step + '  (frame ' + (index + 1) + ' / ' + FRAMES.length + ')';
  el('slider').value = index;
  const h = f.header;
  el('header').textContent = 'stage ' + h.stage + '  turn ' + h.turn + '  HP ' + h.hp + '  credits ' + h.credits +
    '  energy ' + h.energy + '  siphons ' + h.siphons + '  score ' + h.score + '  attack ' + h.attack +
    (h.show ? '  SHOW' : '') + (h.calm ? '  CALM' : '') + (f.reveal ? '  (revealed)' : '');
  const probs = {};
  const dirs = f.policy && f.policy.directions;
  let player = null;
  for (const c of f.cells) if (c.player) player = c;
  if (dirs && player) dirs.forEach((p, d) => { probs[(player.row + DIRS[d][0]) + ',' + (player.col + DIRS[d][1])] = p; });
  for (const c of f.cells) {
    const node = el('cell-' + c.row + '-' + c.col);
    node.className = 'cell' + (c.block ? (c.block.type === 'question' ? ' question' : ' block') : '') +
      (c.siphoned ? ' siphoned' : '') + (c.exit ? ' exit' : '');
    node.dataset.token = c.token;
    const p = probs[c.row + ',' + c.col];
    node.innerHTML = c.parts.map(part).join('') + (p > 0 ? '<span class="prob">' + (100 * p).toFixed(0) + '%</span>' : '');
  }
  let out = '';
  if (f.action) out += '<div><b>action</b> <span class="player">' + esc(f.action.name) + '</span></div>';
  if (f.reward) {
    out += '<div><b>reward</b> ' + f.reward.total.toFixed(4) + '</div>';
    for (const [k, v] of Object.entries(f.reward.components)) out += '<div class="dim">&nbsp;&nbsp;' + esc(k) + ' ' + (v >= 0 ? '+' : '') + v.toFixed(4) + '</div>';
  }
  if (f.policy) {
    if (f.policy.value !== null) out += '<div><b>value</b> ' + f.policy.value.toFixed(3) + '</div>';
    if (f.policy.top.length) out += '<div><b>policy</b></div>';
    for (const t of f.policy.top) out += '<div>' + esc(t.name).padEnd(10) + ' <span class="bar" style="width:' + Math.round(160 * t.prob) + 'px"></span> ' + (100 * t.prob).toFixed(1) + '%</div>';
  }
  if (f.programs.length) out += '<div class="dim">programs: ' + f.programs.map(p => esc(p.name)).join(' ') + '</div>';
  if (f.outcome) out += '<div class="outcome">episode over: ' + esc(f.outcome) + '</div>';
  el('panel').innerHTML = out;
}
function go(i) { index = Math.max(0, Math.min(FRAMES.length - 1, i)); draw(); }
function toggle() {
  if (timer) { clearInterval(timer); timer = null; el('play').textContent = 'play'; return; }
  if (index >= FRAMES.length - 1) index = 0;
  el('play').textContent = 'pause';
  timer = setInterval(() => { if (index >= FRAMES.length - 1) toggle(); else go(index + 1); }, 1000 / __FPS__);
}
el('slider').max = FRAMES.length - 1;
el('slider').addEventListener('input', e => go(parseInt(e.target.value, 10)));
el('prev').addEventListener('click', () => go(index - 1));
el('next').addEventListener('click', () => go(index + 1));
el('play').addEventListener('click', toggle);
document.addEventListener('keydown', e => {
  if (e.key === 'ArrowRight') { go(index + 1); e.preventDefault(); }
  else if (e.key === 'ArrowLeft') { go(index - 1); e.preventDefault(); }
  else if (e.key === ' ') { toggle(); e.preventDefault(); }
  else if (e.key === 'Home') go(0);
  else if (e.key === 'End') go(FRAMES.length - 1);
});
draw();
"""  # noqa: E501 (JavaScript emitted verbatim into the page; wrapping would change its bytes)


def _summary_table(rows: list) -> str:
    if not rows:
        return ""
    columns = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(row.get(c, '')))}</td>"
                                    for c in columns) + "</tr>" for row in rows)
    return f"<table id=\"summary\"><tr>{head}</tr>{body}</table>"


def replay_html(frames: list, *, title: str = "HackMatrix replay", summary: list | None = None,
                fps: float = 4.0) -> str:
    """The HTML document replaying ``frames`` (``frame_view`` dicts, each with an added
    ``episode`` number); ``summary`` rows (dicts with the same keys) become a table."""
    if not frames:
        raise ValueError("replay_html needs at least one frame")
    # "</" inside the JSON would end the <script> element early.
    data = json.dumps(frames, separators=(",", ":")).replace("</", "<\\/")
    directions = json.dumps([[int(DIR_DROW[d]), int(DIR_DCOL[d])] for d in range(4)])
    script = _SCRIPT.replace("__DIRS__", directions).replace("__FPS__", repr(float(fps)))
    cells = "".join(f'<div class="cell" id="cell-{row}-{col}"></div>'
                    for row in reversed(range(GRID)) for col in range(GRID))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        "<div id=\"controls\"><button id=\"prev\">&larr;</button><button id=\"play\">play"
        "</button><button id=\"next\">&rarr;</button><input type=\"range\" id=\"slider\" "
        "min=\"0\" max=\"0\" value=\"0\"><span id=\"step-counter\"></span></div>"
        "<div id=\"header\"></div>"
        f"<div id=\"main\"><div id=\"board\">{cells}</div><div id=\"panel\"></div></div>"
        f"{_summary_table(summary or [])}"
        "<p class=\"dim\">keys: &larr; / &rarr; step, space play/pause, Home / End</p>"
        f"<script type=\"application/json\" id=\"frames\">{data}</script>"
        f"<script>{script}</script></body></html>\n")
