"""The loss curve of a training log (train.py's log.jsonl) as a small SVG, no
plotting library needed: training loss and the two validation losses
(held-out text, held-out chat answers) against tokens seen."""
import json

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 720, 360, 56, 220, 20, 44
SERIES = [("train_loss", "training loss (mixed)", "#1f77b4"),
          ("val_text", "validation: text", "#ff7f0e"),
          ("val_chat", "validation: chat answers", "#2ca02c")]


def write_svg(log_path, svg_path):
    with open(log_path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    points = {key: [(r["tokens"] / 1e6, r[key]) for r in rows if key in r] for key, _, _ in SERIES}
    xs = [x for pts in points.values() for x, _ in pts]
    ys = [y for pts in points.values() for _, y in pts]
    x_max = max(xs) or 1.0
    y_min, y_max = 0.0, min(max(ys), 10.0)

    def px(x):
        return PAD_L + (W - PAD_L - PAD_R) * x / x_max

    def py(y):
        y = min(y, y_max)
        return PAD_T + (H - PAD_T - PAD_B) * (1 - (y - y_min) / (y_max - y_min))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="11"><rect width="{W}" height="{H}" fill="white"/>']
    for i in range(6):  # horizontal grid with loss labels
        y = y_min + (y_max - y_min) * i / 5
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.1f}</text>')
    for i in range(6):
        x = x_max * i / 5
        out.append(f'<text x="{px(x):.1f}" y="{H - PAD_B + 16}" text-anchor="middle">{x:.0f}</text>')
    out.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{H - 8}" text-anchor="middle">tokens seen (millions)</text>')
    out.append(f'<text x="14" y="{(PAD_T + H - PAD_B) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(PAD_T + H - PAD_B) / 2})">cross-entropy (nats/token)</text>')
    out.append(f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}" '
               'fill="none" stroke="#444"/>')
    for n, (key, label, color) in enumerate(SERIES):
        pts = points[key]
        if pts:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')
            final = f" ({pts[-1][1]:.2f})"
        else:
            final = ""
        ly = PAD_T + 14 + 18 * n
        out.append(f'<line x1="{W - PAD_R + 10}" x2="{W - PAD_R + 28}" y1="{ly - 4}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{W - PAD_R + 32}" y="{ly}">{label}{final}</text>')
    out.append("</svg>")
    with open(svg_path, "w") as f:
        f.write("\n".join(out) + "\n")
