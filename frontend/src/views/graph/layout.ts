// The Execution graph's "rows" layout: nodes in program order, read like text (left to right, then the next row),
// every opened node a box laid out the same way inside. A step is mostly one chain of ops, which a layered layout
// draws as one long line that only fits the window at an unreadable zoom; rows wrap it to the window's shape, so
// the first view fits the whole cut with readable labels. The row width is picked to give the largest fitting zoom.
import type { Core, NodeCollection, NodeSingular } from "cytoscape";

/** Node size and the spacing around it, in model pixels (the canvas's stylesheet uses the same). */
export interface FlowSizes {
  nodeW: number;
  nodeH: number;
  /** A box's padding (the stylesheet's `padding` of `:parent`) and the height of its label above it. */
  pad: number;
  label: number;
  gapX: number;
  gapY: number;
}

interface Block {
  w: number;
  h: number;
  place(x: number, y: number, out: Map<string, { x: number; y: number }>): void;
}

const seqOf = (n: NodeSingular): number => Number(n.data("seq") ?? 0);

/** A compound box's program order: its first descendant's. */
function firstSeq(n: NodeSingular): number {
  if (n.isChildless()) return seqOf(n);
  let best = Infinity;
  n.descendants(":childless").forEach((d) => {
    best = Math.min(best, seqOf(d));
  });
  return best;
}

function ordered(nodes: NodeCollection): NodeSingular[] {
  const keyed = nodes.map((n) => [firstSeq(n), n] as const);
  return keyed.sort((a, b) => a[0] - b[0]).map(([, n]) => n);
}

function block(node: NodeSingular, maxW: number, s: FlowSizes): Block {
  if (node.isChildless()) {
    const id = node.id();
    return { w: s.nodeW, h: s.nodeH, place: (x, y, out) => out.set(id, { x: x + s.nodeW / 2, y: y + s.nodeH / 2 }) };
  }
  const inner = flow(ordered(node.children()), maxW - 2 * s.pad, s);
  return {
    w: inner.w + 2 * s.pad,
    h: inner.h + 2 * s.pad + s.label,
    place: (x, y, out) => inner.place(x + s.pad, y + s.label + s.pad, out),
  };
}

/** `items` in rows no wider than `maxW` (an item wider than that gets a row of its own). */
function flow(items: NodeSingular[], maxW: number, s: FlowSizes): Block {
  const blocks = items.map((n) => block(n, Math.max(maxW, s.nodeW + 2 * s.pad), s));
  const rows: { items: { b: Block; x: number }[]; h: number }[] = [];
  let x = 0;
  for (const b of blocks) {
    let row = rows[rows.length - 1];
    if (!row || (x > 0 && x + b.w > maxW)) {
      row = { items: [], h: 0 };
      rows.push(row);
      x = 0;
    }
    row.items.push({ b, x });
    row.h = Math.max(row.h, b.h);
    x += b.w + s.gapX;
  }
  const w = Math.max(0, ...rows.map((r) => r.items.reduce((m, it) => Math.max(m, it.x + it.b.w), 0)));
  const h = rows.reduce((sum, r) => sum + r.h, 0) + s.gapY * Math.max(0, rows.length - 1);
  return {
    w,
    h,
    place: (x0, y0, out) => {
      let y = y0;
      for (const r of rows) {
        for (const it of r.items) it.b.place(x0 + it.x, y, out);
        y += r.h + s.gapY;
      }
    },
  };
}

/** Lay `cy`'s nodes out in rows for a viewport of `width` x `height` screen pixels; returns the zoom at which the
 * whole layout fits it. */
export function rowsLayout(cy: Core, width: number, height: number, s: FlowSizes, margin = 24): number {
  const roots = ordered(cy.nodes().orphans());
  if (!roots.length) return 1;
  const fitZoom = (b: Block) => Math.min((width - 2 * margin) / Math.max(1, b.w), (height - 2 * margin) / Math.max(1, b.h));
  // Candidate row widths from one node to everything on one row; each try is linear in the view's size.
  const widest = flow(roots, Infinity, s).w;
  let best: Block | null = null;
  let bestZoom = -1;
  for (let w = s.nodeW + 2 * s.pad; ; w *= 1.15) {
    const b = flow(roots, Math.min(w, widest), s);
    const z = fitZoom(b);
    if (z > bestZoom) {
      best = b;
      bestZoom = z;
    }
    if (w >= widest) break;
  }
  const positions = new Map<string, { x: number; y: number }>();
  best!.place(0, 0, positions);
  cy.batch(() => {
    cy.nodes(":childless").forEach((n) => {
      const p = positions.get(n.id());
      if (p) n.position(p);
    });
  });
  return bestZoom;
}
