#!/usr/bin/env python3
"""Draws bench-peers.svg from the CSV the peers bench prints.

    cargo bench -p mcp-tasks --bench peers | tee peers.txt
    python3 crates/mcp-tasks/benches/peers-plot.py peers.txt bench-peers.svg

Two panels (tasks/get and creation), throughput against concurrency on a
log scale, one line per server. Standard library only.
"""
import csv
import io
import math
import sys

COLORS = ["#888888", "#1f77b4", "#d62728", "#ff7f0e", "#2ca02c", "#9467bd"]


def read(path):
    text = open(path, encoding="utf-8").read()
    start = text.index("load,server,concurrency")
    rows = []
    for line in text[start:].splitlines():
        if not line.strip():
            break
        rows.append(line)
    data = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        data.setdefault(row["load"], {}).setdefault(row["server"], []).append(
            (int(row["concurrency"]), float(row["rate"]))
        )
    return data


def panel(out, x0, title, series, servers, width=460, height=300):
    left, top, right, bottom = x0 + 60, 40, x0 + width - 10, height - 40
    levels = sorted({c for points in series.values() for c, _ in points})
    top_rate = max(rate for points in series.values() for _, rate in points) * 1.1
    lx = lambda c: left + (math.log(c) - math.log(levels[0])) / (
        (math.log(levels[-1]) - math.log(levels[0])) or 1) * (right - left)
    ly = lambda r: bottom - r / top_rate * (bottom - top)
    out.append(f'<text x="{(left + right) / 2}" y="24" text-anchor="middle" font-size="14">{title}</text>')
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>')
    for c in levels:
        out.append(f'<text x="{lx(c)}" y="{bottom + 16}" text-anchor="middle" font-size="11">{c}</text>')
    out.append(f'<text x="{(left + right) / 2}" y="{bottom + 32}" text-anchor="middle" font-size="11">connections (log)</text>')
    step = 10 ** math.floor(math.log10(top_rate / 5))
    step *= 5 if top_rate / step > 25 else 2 if top_rate / step > 10 else 1
    tick = 0
    while tick <= top_rate:
        out.append(f'<text x="{left - 6}" y="{ly(tick) + 4}" text-anchor="end" font-size="10">{int(tick):,}</text>')
        out.append(f'<line x1="{left}" y1="{ly(tick)}" x2="{right}" y2="{ly(tick)}" stroke="#eee"/>')
        tick += step
    for i, server in enumerate(servers):
        points = sorted(series.get(server, []))
        if not points:
            continue
        path = " ".join(f"{lx(c):.1f},{ly(r):.1f}" for c, r in points)
        out.append(f'<polyline fill="none" stroke="{COLORS[i % len(COLORS)]}" stroke-width="2" points="{path}"/>')
        for c, r in points:
            out.append(f'<circle cx="{lx(c):.1f}" cy="{ly(r):.1f}" r="2.5" fill="{COLORS[i % len(COLORS)]}"/>')


def main():
    data = read(sys.argv[1])
    servers = []
    for load in ("get", "create"):
        for server in data.get(load, {}):
            if server not in servers:
                servers.append(server)
    width, height = 960, 360
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    panel(out, 0, "tasks/get per second", data.get("get", {}), servers)
    panel(out, 480, "task creations (tools/call) per second", data.get("create", {}), servers)
    for i, server in enumerate(servers):
        x = 70 + (i % 6) * 150
        out.append(f'<rect x="{x}" y="{height - 14}" width="10" height="10" fill="{COLORS[i % len(COLORS)]}"/>')
        out.append(f'<text x="{x + 14}" y="{height - 5}" font-size="11">{server}</text>')
    out.append("</svg>")
    open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
