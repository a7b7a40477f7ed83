"""Draws docs/call-structures.svg: the data structures one lab call passes through, from the Python
arguments to the kernel, in the four levels of docs/design.md - which level owns each structure and
which boundary each arrow crosses. Plain SVG text, no plotting library: run
`python3 docs/draw_call_structures.py` after changing a structure, and tests/test_docs.py checks the
committed picture is this script's output."""
import os
from html import escape

LEVELS = [  # (name, what lives there, top y)
    ("1  Python", "lab/__init__.py, lab.nn", 20),
    ("2  Binding", "src/binding/", 120),
    ("3  Dispatch", "src/dispatch/", 300),
    ("4  Kernels", "src/kernels/", 520),
]
LEVEL_HEIGHT = {0: 90, 1: 170, 2: 210, 3: 110}

BOXES = {  # name: (x, y, width, title, lines): three columns at x = 40, 380 and 790
    "args": (40, 45, 230, "PyObject *args, kwnames",
             ["arrays of any producer, options"]),
    "signature": (40, 150, 230, "lab_signature + slots",
                  ["args.c: names interned once,", "compared by pointer"]),
    "array": (380, 150, 250, "lab_array",
              ["array_reader.c / cai_reader.c:", "data, dtype, shape, strides,", "device, stream - owned, no PyObject"]),
    "call": (790, 150, 250, "lab_op_call",
             ["driver.h: func, operand groups,", "stream argument, description"]),
    "description": (790, 330, 250, "the kind's description",
                    ["e.g. lab_matmul_call,", "lab_linear_ce_call: what was read", "+ what the plan decides"]),
    "scope": (380, 330, 250, "lab_launch_scope",
              ["launch_scope.c: the stream, the", "device, ordering with producers,", "the first error"]),
    "launch": (790, 545, 250, "launch struct (launch.h)",
               ["plain C: pointers, sizes, strides,", "dtypes, the path - no Python"]),
    "kernel": (380, 545, 250, "kernel<<<grid, block, 0, stream>>>",
               ["a .cu file's extern \"C\" launcher", "returns cudaError_t"]),
}
ARROWS = [  # (from, to, label lines): what crosses from one structure to the next
    ("args", "signature", ["lab_parse_args"]),
    ("signature", "array", ["lab_read_array", "(CAI, DLPack)"]),
    ("array", "call", ["lab_op_call_add"]),
    ("call", "description", ["lab_run_op:", "kind->plan"]),
    ("description", "scope", ["lab_launch_scope_begin"]),
    ("description", "launch", ["the plan", "fills it"]),
    ("launch", "kernel", ["kind->launch, on", "the scope's stream"]),
]
WIDTH, HEIGHT = 1080, 650
BOX_HEIGHT_PER_LINE, TITLE_HEIGHT = 15, 22


def box_height(lines):
    return TITLE_HEIGHT + BOX_HEIGHT_PER_LINE * len(lines) + 8


def center(name):
    x, y, w, _, lines = BOXES[name]
    return x + w / 2, y + box_height(lines) / 2


def edge_point(name, toward):
    """Where a line from the box's center toward `toward` leaves the box."""
    x, y, w, _, lines = BOXES[name]
    h = box_height(lines)
    cx, cy = center(name)
    dx, dy = toward[0] - cx, toward[1] - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min(w / 2 / abs(dx) if dx else float("inf"), h / 2 / abs(dy) if dy else float("inf"))
    return cx + dx * scale, cy + dy * scale


def svg():
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">',
           '<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto">'
           '<path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker></defs>',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    shades = ["#eef4fb", "#f3f9ee", "#fbf5ea", "#f6eef8"]
    for i, (name, where, top) in enumerate(LEVELS):
        out.append(f'<rect x="10" y="{top}" width="{WIDTH - 20}" height="{LEVEL_HEIGHT[i]}" fill="{shades[i]}" '
                   f'stroke="#bbb"/>')
        out.append(f'<text x="20" y="{top + 16}" font-weight="bold">{escape(name)}'
                   f'<tspan font-weight="normal" fill="#555">   {escape(where)}</tspan></text>')
    for src, dst, label in ARROWS:
        (x1, y1), (x2, y2) = edge_point(src, center(dst)), edge_point(dst, center(src))
        out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#333" '
                   f'marker-end="url(#arrow)"/>')
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        vertical = abs(x2 - x1) < abs(y2 - y1)  # beside a vertical arrow, above a horizontal one
        anchor, x, y = ("start", mx + 8, my - 6 * (len(label) - 1)) if vertical else \
            ("middle", mx, my - 6 - 13 * (len(label) - 1))
        for k, line in enumerate(label):
            out.append(f'<text x="{x:.1f}" y="{y + 13 * k:.1f}" text-anchor="{anchor}" fill="#a33" '
                       f'font-size="11">{escape(line)}</text>')
    for name, (x, y, w, title, lines) in BOXES.items():
        out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{box_height(lines)}" rx="6" fill="white" '
                   f'stroke="#246"/>')
        out.append(f'<text x="{x + 8}" y="{y + 16}" font-weight="bold" font-family="DejaVu Sans Mono, monospace">'
                   f'{escape(title)}</text>')
        for k, line in enumerate(lines):
            out.append(f'<text x="{x + 8}" y="{y + TITLE_HEIGHT + 12 + k * BOX_HEIGHT_PER_LINE}">{escape(line)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "call-structures.svg")

if __name__ == "__main__":
    with open(PATH, "w") as f:
        f.write(svg())
    print(f"wrote {PATH}")
