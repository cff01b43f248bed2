// The Cytoscape canvas of the Execution graph tab. Layout: "rows" (program order wrapped to the window's shape,
// graphLayout.ts; the default, so that the first view fits the whole cut readably) or "layered" (dagre, through
// cytoscape-dagre); every opened node drawn as a compound box around its children. Expanding or collapsing keeps the touched node
// where it was on screen (the new layout is shifted under it; no re-fit). Wheel zoom is centred on the pointer and
// never scrolls the page; labels hide when too small to read (hover shows the full name); colours follow the
// plugin's light / dark theme.
import cytoscape, { type Core, type ElementDefinition, type NodeSingular, type StylesheetJson } from "cytoscape";
import dagre from "cytoscape-dagre";
import { h } from "../../dom";
import type { GraphNode, GraphView } from "./api";
import { rowsLayout, type FlowSizes } from "./layout";
import { GraphMinimap } from "./minimap";
import { currentTheme, onThemeChange, type Theme } from "./theme";

cytoscape.use(dagre);

export type ColorBy = "gpu_us" | "cpu_us" | "efficiency";
export type LayoutKind = "rows" | "layered";

export const CRITICAL = "#d93025";
const NODE_W = 160;
const NODE_H = 34;
const FONT_PX = 14;
/** A node brought into view (search, critical path) is shown at least this close: labels at >= 10 px (14 * 0.72). */
export const READABLE_ZOOM = 0.72;
/** Labels smaller than this on screen are not drawn (hover still names the node). */
const MIN_LABEL_PX = 7;
const BOX_PAD = 6;
const ROWS: FlowSizes = { nodeW: NODE_W, nodeH: NODE_H, pad: BOX_PAD, label: FONT_PX + 2, gapX: 16, gapY: 10 };

interface Palette {
  text: string;
  border: string;
  edge: string;
  box: string;
  boxBorder: string;
  boxText: string;
  unknown: string;
  select: string;
  match: string;
}

const PALETTES: Record<Theme, Palette> = {
  light: { text: "#1f2933", border: "#9aa5b1", edge: "#b8c0c9", box: "#f5f7fa", boxBorder: "#cbd2d9", boxText: "#616e7c", unknown: "#e8eaed", select: "#1a73e8", match: "#fbbc04" },
  dark: { text: "#e4e7eb", border: "#7b8794", edge: "#616e7c", box: "#1f2933", boxBorder: "#3e4c59", boxText: "#9aa5b1", unknown: "#3e4c59", select: "#8ab4f8", match: "#fdd663" },
};

/** A 0..1 value as a colour: pale to deep orange (time; log scale), red to green (efficiency). */
export function ramp(t: number, efficiency: boolean, theme: Theme): string {
  const x = Math.max(0, Math.min(1, t));
  const hue = efficiency ? 120 * x : 210 - 185 * x;
  const light = theme === "dark" ? (efficiency ? 38 : 26 + 20 * x) : efficiency ? 60 : 92 - 40 * x;
  return `hsl(${hue.toFixed(0)}, ${theme === "dark" ? 55 : 70}%, ${light.toFixed(0)}%)`;
}

export function unknownFill(theme: Theme): string {
  return PALETTES[theme].unknown;
}

function colorOf(n: GraphNode, by: ColorBy, max: number, theme: Theme): string {
  if (by === "efficiency") return n.efficiency === null ? unknownFill(theme) : ramp(n.efficiency, true, theme);
  const v = by === "gpu_us" ? n.gpu_us : n.cpu_us;
  if (!v || max <= 0) return unknownFill(theme);
  return ramp(Math.log1p(v) / Math.log1p(max), false, theme);
}

/** Characters that fit a node at FONT_PX (the full name shows on hover). */
const LABEL_CHARS = 20;

/** A node's name cut to fit, keeping the "(+N)" of an expandable node in sight. */
function nodeLabel(n: GraphNode): string {
  const more = n.expandable ? ` (+${n.size - (n.kind === "group" ? 0 : 1)})` : "";
  const room = Math.max(6, LABEL_CHARS - more.length);
  const name = n.label.length > room ? n.label.slice(0, room - 1) + "…" : n.label;
  return name + more;
}

function styles(p: Palette): StylesheetJson {
  return [
    {
      selector: "node",
      style: {
        shape: "round-rectangle",
        width: NODE_W,
        height: NODE_H,
        label: "data(label)",
        "font-size": FONT_PX,
        "min-zoomed-font-size": MIN_LABEL_PX,
        color: p.text,
        "text-valign": "center",
        "text-halign": "center",
        "text-wrap": "ellipsis",
        "text-max-width": `${NODE_W - 10}px`,
        "background-color": "data(fill)",
        "border-width": 1,
        "border-color": p.border,
      },
    },
    {
      selector: ":parent",
      style: {
        shape: "round-rectangle",
        "background-color": p.box,
        "background-opacity": 0.55,
        "border-color": p.boxBorder,
        "border-width": 1,
        "border-style": "solid",
        color: p.boxText,
        "text-valign": "top",
        "text-halign": "center",
        "text-margin-y": -2,
        "text-max-width": "1000px",
        padding: `${BOX_PAD}px`,
      },
    },
    { selector: "node[kind = 'group']", style: { "border-style": "dashed" } },
    { selector: "node[?expandable]:childless", style: { "border-width": 2.5 } },
    { selector: "node[?critical]:childless", style: { "border-color": CRITICAL, "border-width": 3 } },
    { selector: "node:selected", style: { "overlay-color": p.select, "overlay-opacity": 0.3, "overlay-padding": 5 } },
    { selector: "node.match", style: { "underlay-color": p.match, "underlay-opacity": 0.7, "underlay-padding": 7 } },
    {
      selector: "edge",
      style: {
        width: 1.2,
        "line-color": p.edge,
        "target-arrow-color": p.edge,
        "target-arrow-shape": "triangle",
        "arrow-scale": 0.8,
        "curve-style": "bezier",
        opacity: 0.6,
      },
    },
    { selector: "edge[?critical]", style: { width: 2.4, "line-color": CRITICAL, "target-arrow-color": CRITICAL, "z-index": 10, opacity: 1 } },
  ];
}

/** Most boxes a view is laid out with; past it (a deep "depth" cut) the view is laid out flat, because dagre's
 * compound layout grows much faster than its flat one (a 160-node cut with 120 boxes takes seconds). */
const MAX_BOXES = 40;

/** Which opened node draws each node's box: box id per opened node (or null), from `boxIds`. */
export interface Boxes {
  ids: Set<number>;
  /** The nearest ancestor drawn as a box, for any node (visible or opened) by its display parent. */
  parentOf(parent: number | null): string | undefined;
}

/** The opened nodes drawn as boxes: an opened node below the ET root holding at least two visible nodes, unless it
 * holds the whole view (a box around everything says nothing) or just what one of its boxes holds (a chain of
 * single-child containers draws one box, the innermost). */
export function boxIds(view: GraphView): Boxes {
  const opened = new Map(view.expanded.filter((e) => e.depth > 0).map((e) => [e.id, e.parent]));
  const inside = new Map<number, number>();
  for (const n of view.nodes) {
    for (let p = n.parent; p !== null && opened.has(p); p = opened.get(p) ?? null) inside.set(p, (inside.get(p) ?? 0) + 1);
  }
  const heldByChild = new Set<number>();
  for (const [id, parent] of opened) {
    if (parent !== null && inside.get(parent) === inside.get(id)) heldByChild.add(parent);
  }
  let ids = new Set(
    [...opened.keys()].filter((id) => {
      const n = inside.get(id) ?? 0;
      return n >= 2 && n < view.nodes.length && !heldByChild.has(id);
    }),
  );
  if (ids.size > MAX_BOXES) ids = new Set();
  const parentOf = (parent: number | null): string | undefined => {
    for (let p = parent; p !== null; p = opened.get(p) ?? null) if (ids.has(p)) return String(p);
    return undefined;
  };
  return { ids, parentOf };
}

/** Whether `ancestor` is on the chain of opened nodes that starts at the display parent `parent`. */
function isUnder(parent: number | null, ancestor: number, up: Map<number, number | null>): boolean {
  for (let p = parent, i = 0; p !== null && i < up.size + 1; p = up.get(p) ?? null, i++) if (p === ancestor) return true;
  return false;
}

export class GraphCanvas {
  readonly cy: Core;
  private colorBy: ColorBy = "gpu_us";
  private layoutKind: LayoutKind = "rows";
  private view: GraphView | null = null;
  private theme: Theme = currentTheme();
  private minimap: GraphMinimap;
  private tip = h("div", { class: "graph-tip", attrs: { role: "tooltip" } });
  private stopTheme: () => void;

  constructor(
    private container: HTMLElement,
    minimapHost: HTMLElement,
    onSelect: (id: number) => void,
    onOpen: (id: number) => void,
  ) {
    this.cy = cytoscape({
      container,
      elements: [],
      layout: { name: "preset" },
      minZoom: 0.03,
      maxZoom: 3,
      // The wheel is handled below (zoom about the pointer, a fixed ratio per notch, no page scroll).
      userZoomingEnabled: false,
      boxSelectionEnabled: false,
      autoungrabify: true,
      textureOnViewport: false,
      hideEdgesOnViewport: false,
      style: styles(PALETTES[this.theme]),
    });
    // End-to-end tests find node positions through the container (the canvas has no DOM per node).
    Object.defineProperty(container, "cy", { value: this.cy, configurable: true });
    this.cy.on("tap", "node:childless", (ev) => onSelect(Number(ev.target.id())));
    this.cy.on("tap", "node:parent", (ev) => onSelect(Number(ev.target.id())));
    this.cy.on("dbltap", "node[?expandable]:childless", (ev) => onOpen(Number(ev.target.id())));
    container.addEventListener("wheel", (ev) => this.wheel(ev), { passive: false });
    container.appendChild(this.tip);
    this.cy.on("mouseover", "node", (ev) => this.showTip(ev.target as NodeSingular));
    this.cy.on("mouseout", "node", () => (this.tip.hidden = true));
    this.cy.on("viewport", () => (this.tip.hidden = true));
    this.tip.hidden = true;
    this.minimap = new GraphMinimap(minimapHost, this.cy);
    this.stopTheme = onThemeChange((t) => this.setTheme(t));
  }

  /** Draw `view`. `anchor`: the node the user just expanded or collapsed, kept where it was on screen; without
   * one (a new selection, a new collapse mode) the view fits, never below a readable zoom. */
  show(view: GraphView, selected: number | null, anchor: number | null = null): void {
    const anchorAt = anchor !== null ? this.topCentre(String(anchor)) : null;
    this.view = view;
    const els = this.elements(view);
    this.cy.batch(() => {
      this.cy.elements().remove();
      this.cy.add(els);
    });
    const started = performance.now();
    this.runLayout();
    // Tests and users' bug reports read the layout time here.
    this.container.dataset.layoutMs = (performance.now() - started).toFixed(0);
    const now = anchor !== null ? this.topCentre(String(anchor)) : null;
    if (anchorAt && now) {
      const dx = anchorAt.x - now.x;
      const dy = anchorAt.y - now.y;
      this.cy.nodes(":childless").shift({ x: dx, y: dy });
    } else {
      this.firstView();
    }
    if (selected !== null) this.select(selected, false);
    this.minimap.sync();
  }

  /** Lay the view out again in another way, fitted. */
  setLayout(kind: LayoutKind): void {
    this.layoutKind = kind;
    if (!this.view) return;
    this.runLayout();
    this.firstView();
    this.minimap.sync();
  }

  get layout(): LayoutKind {
    return this.layoutKind;
  }

  private runLayout(): void {
    if (this.layoutKind === "rows") {
      rowsLayout(this.cy, this.cy.width(), this.cy.height(), ROWS);
      return;
    }
    // Ranks come from the data edges only: an edge that only joins consecutive critical-path ops would chain the
    // whole view into one tall column.
    this.cy
      .elements()
      .difference("edge[?pathOnly]")
      .layout({
        name: "dagre",
        rankDir: "LR",
        nodeSep: 24,
        rankSep: 46,
        fit: false,
        animate: false,
        // Program order breaks ties, so that a re-layout after an expansion keeps siblings in the same order.
        sort: (a: NodeSingular, b: NodeSingular) => Number(a.data("seq") ?? 0) - Number(b.data("seq") ?? 0),
      } as cytoscape.LayoutOptions)
      .run();
  }

  setColor(by: ColorBy): void {
    this.colorBy = by;
    this.recolor();
  }

  get color(): ColorBy {
    return this.colorBy;
  }

  /** The largest value of the colour metric in the view (the legend's top end). */
  maxValue(): number {
    return this.view ? this.maxOf(this.view.nodes) : 0;
  }

  select(id: number, move = true): void {
    const el = this.cy.getElementById(String(id));
    if (el.empty()) return;
    this.cy.elements().unselect();
    el.select();
    if (move && !this.onScreen(el)) this.cy.animate({ center: { eles: el }, zoom: Math.max(this.cy.zoom(), READABLE_ZOOM) }, { duration: 200 });
  }

  zoomToFit(): void {
    this.cy.animate({ fit: { eles: this.cy.elements(), padding: 24 } }, { duration: 200 });
  }

  /** Fit the selected node (or, with none, the critical-path nodes), but never closer than 1.5x. */
  zoomToSelection(): void {
    const selected = this.cy.$("node:selected");
    const eles = selected.nonempty() ? selected : this.cy.$("node[?critical]:childless");
    if (eles.empty()) return;
    const bb = eles.boundingBox();
    const zoom = Math.min(1.5, this.cy.width() / (bb.w + 160), this.cy.height() / (bb.h + 160));
    this.cy.animate({ zoom: Math.max(zoom, this.cy.minZoom()), center: { eles } }, { duration: 200 });
  }

  zoomBy(factor: number): void {
    this.zoomAbout(this.cy.zoom() * factor, { x: this.cy.width() / 2, y: this.cy.height() / 2 });
  }

  highlight(ids: number[]): void {
    this.cy.nodes().removeClass("match");
    for (const id of ids) this.cy.getElementById(String(id)).addClass("match");
  }

  resize(): void {
    this.cy.resize();
    this.minimap.sync();
  }

  destroy(): void {
    this.stopTheme();
    this.minimap.destroy();
    this.cy.destroy();
  }

  private elements(view: GraphView): ElementDefinition[] {
    const boxes = boxIds(view);
    const parentOf = boxes.parentOf;
    const els: ElementDefinition[] = [];
    for (const e of view.expanded) {
      if (!boxes.ids.has(e.id)) continue;
      const label = e.label.length > 60 ? e.label.slice(0, 59) + "…" : e.label;
      els.push({ group: "nodes", data: { id: String(e.id), label, full: e.label, box: true, parent: parentOf(e.parent) } });
    }
    const max = this.maxOf(view.nodes);
    view.nodes.forEach((n, seq) => {
      els.push({
        group: "nodes",
        data: {
          id: String(n.id),
          seq,
          label: nodeLabel(n),
          full: n.label,
          kind: n.kind,
          expandable: n.expandable,
          critical: n.critical,
          fill: colorOf(n, this.colorBy, max, this.theme),
          parent: parentOf(n.parent),
          up: n.parent,
        },
      });
    });
    view.edges.forEach((e, i) =>
      els.push({ group: "edges", data: { id: `e${i}`, source: String(e.source), target: String(e.target), critical: e.critical, pathOnly: e.count === 0 } }),
    );
    return els;
  }

  /** A node's top centre plus half a node's height: for a plain node its centre; for a compound box the point
   * where its first row starts; for an opened node drawn without a box, that of the nodes it shows. Anchoring on
   * it keeps an expanded node's header where the node stood. */
  private topCentre(id: string): { x: number; y: number } | null {
    let el = this.cy.getElementById(id);
    if (el.empty()) {
      const up = new Map((this.view?.expanded ?? []).map((e) => [e.id, e.parent]));
      el = this.cy.nodes(":childless").filter((n) => isUnder(n.data("up"), Number(id), up));
    }
    if (el.empty()) return null;
    const bb = el.boundingBox({ includeLabels: false, includeOverlays: false });
    return { x: (bb.x1 + bb.x2) / 2, y: bb.y1 + NODE_H / 2 };
  }

  /** The whole view, fitted (never closer than 1.5x, so that a tiny graph does not fill the window). */
  private firstView(): void {
    this.cy.fit(undefined, 24);
    if (this.cy.zoom() > 1.5) {
      this.cy.zoom(1.5);
      this.cy.center();
    }
  }

  private onScreen(el: cytoscape.CollectionReturnValue): boolean {
    const p = el.renderedPosition();
    return p.x > 0 && p.y > 0 && p.x < this.cy.width() && p.y < this.cy.height() && this.cy.zoom() >= READABLE_ZOOM * 0.75;
  }

  private wheel(ev: WheelEvent): void {
    ev.preventDefault();
    // One notch (100 px in pixel mode, 3 lines in line mode) zooms by 1.2x; trackpads scroll in small steps.
    const px = ev.deltaMode === 1 ? ev.deltaY * 33 : ev.deltaMode === 2 ? ev.deltaY * 400 : ev.deltaY;
    const factor = Math.pow(1.2, -Math.max(-300, Math.min(300, px)) / 100);
    const rect = this.container.getBoundingClientRect();
    this.zoomAbout(this.cy.zoom() * factor, { x: ev.clientX - rect.left, y: ev.clientY - rect.top });
  }

  private zoomAbout(level: number, at: { x: number; y: number }): void {
    this.cy.zoom({ level: Math.max(this.cy.minZoom(), Math.min(this.cy.maxZoom(), level)), renderedPosition: at });
  }

  private showTip(node: NodeSingular): void {
    const full = String(node.data("full") ?? node.data("label"));
    this.tip.textContent = full;
    const p = node.renderedPosition();
    const top = node.isParent() ? node.renderedBoundingBox().y1 : p.y - (NODE_H / 2) * this.cy.zoom();
    this.tip.style.left = `${Math.max(4, p.x)}px`;
    this.tip.style.top = `${Math.max(4, top - 6)}px`;
    this.tip.hidden = false;
  }

  private setTheme(theme: Theme): void {
    this.theme = theme;
    this.cy.style(styles(PALETTES[theme]));
    this.recolor();
  }

  private recolor(): void {
    if (!this.view) return;
    const max = this.maxOf(this.view.nodes);
    this.cy.batch(() => {
      for (const n of this.view!.nodes) this.cy.getElementById(String(n.id)).data("fill", colorOf(n, this.colorBy, max, this.theme));
    });
    this.minimap.sync();
  }

  private maxOf(nodes: GraphNode[]): number {
    let max = 0;
    for (const n of nodes) max = Math.max(max, (this.colorBy === "gpu_us" ? n.gpu_us : this.colorBy === "cpu_us" ? n.cpu_us : 0) ?? 0);
    return max;
  }
}
