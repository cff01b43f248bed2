// The Cytoscape canvas of the Execution graph tab: preset positions from the server, colour by a metric,
// the critical path in red. Cytoscape only draws: the server lays out, so a view of ~1,000 nodes shows at once.
import cytoscape, { type Core, type ElementDefinition } from "cytoscape";
import type { GraphNode, GraphView } from "./graphApi";

export type ColorBy = "gpu_us" | "cpu_us" | "efficiency";

const CRITICAL = "#d93025";
const UNKNOWN_FILL = "#e8eaed";

/** A 0..1 value as a colour: pale blue to deep orange (time), red to green (efficiency). */
function ramp(t: number, efficiency: boolean): string {
  const x = Math.max(0, Math.min(1, t));
  const hue = efficiency ? 120 * x : 210 - 185 * x;
  const light = efficiency ? 55 : 92 - 40 * x;
  return `hsl(${hue.toFixed(0)}, 70%, ${light.toFixed(0)}%)`;
}

function colorOf(n: GraphNode, by: ColorBy, max: number): string {
  if (by === "efficiency") return n.efficiency === null ? UNKNOWN_FILL : ramp(n.efficiency, true);
  const v = by === "gpu_us" ? n.gpu_us : n.cpu_us;
  if (!v || max <= 0) return UNKNOWN_FILL;
  return ramp(Math.log1p(v) / Math.log1p(max), false);
}

function nodeLabel(n: GraphNode): string {
  const name = n.label.length > 34 ? n.label.slice(0, 33) + "…" : n.label;
  const more = n.expandable ? ` (+${n.size - (n.kind === "group" ? 0 : 1)})` : "";
  return name + more;
}

export class GraphCanvas {
  readonly cy: Core;
  private colorBy: ColorBy = "gpu_us";
  private view: GraphView | null = null;

  constructor(
    container: HTMLElement,
    onSelect: (id: number) => void,
    onOpen: (id: number) => void,
  ) {
    this.cy = cytoscape({
      container,
      elements: [],
      layout: { name: "preset" },
      minZoom: 0.05,
      maxZoom: 3,
      wheelSensitivity: 0.3,
      textureOnViewport: true,
      hideEdgesOnViewport: true,
      style: [
        {
          selector: "node",
          style: {
            shape: "round-rectangle",
            width: 180,
            height: 44,
            label: "data(label)",
            "font-size": 11,
            "text-valign": "center",
            "text-halign": "center",
            "text-wrap": "ellipsis",
            "text-max-width": "170px",
            "background-color": "data(fill)",
            "border-width": 1,
            "border-color": "#9aa0a6",
          },
        },
        { selector: "node[kind = 'group']", style: { "border-style": "dashed" } },
        { selector: "node[?expandable]", style: { "border-width": 2 } },
        { selector: "node[?critical]", style: { "border-color": CRITICAL, "border-width": 3 } },
        { selector: "node:selected", style: { "overlay-color": "#1a73e8", "overlay-opacity": 0.25, "overlay-padding": 4 } },
        { selector: "node.match", style: { "underlay-color": "#fbbc04", "underlay-opacity": 0.6, "underlay-padding": 6 } },
        {
          selector: "edge",
          style: {
            width: 1.2,
            "line-color": "#bdc1c6",
            "target-arrow-color": "#bdc1c6",
            "target-arrow-shape": "triangle",
            "arrow-scale": 0.7,
            "curve-style": "straight",
          },
        },
        { selector: "edge[?critical]", style: { width: 3, "line-color": CRITICAL, "target-arrow-color": CRITICAL, "z-index": 10 } },
      ],
    });
    // End-to-end tests find node positions through the container (the canvas has no DOM per node).
    Object.defineProperty(container, "cy", { value: this.cy, configurable: true });
    this.cy.on("tap", "node", (ev) => onSelect(Number(ev.target.id())));
    this.cy.on("dbltap", "node[?expandable]", (ev) => onOpen(Number(ev.target.id())));
  }

  show(view: GraphView, selected: number | null): void {
    this.view = view;
    const els: ElementDefinition[] = [];
    const max = this.maxOf(view.nodes);
    for (const n of view.nodes) {
      els.push({
        group: "nodes",
        data: { id: String(n.id), label: nodeLabel(n), kind: n.kind, expandable: n.expandable, critical: n.critical > 0, fill: colorOf(n, this.colorBy, max) },
        position: { x: n.x, y: n.y },
      });
    }
    view.edges.forEach((e, i) =>
      els.push({ group: "edges", data: { id: `e${i}`, source: String(e.source), target: String(e.target), critical: e.critical } }),
    );
    this.cy.batch(() => {
      this.cy.elements().remove();
      this.cy.add(els);
    });
    this.cy.fit(undefined, 30);
    if (selected !== null) this.select(selected);
  }

  setColor(by: ColorBy): void {
    this.colorBy = by;
    if (!this.view) return;
    const max = this.maxOf(this.view.nodes);
    this.cy.batch(() => {
      for (const n of this.view!.nodes) this.cy.getElementById(String(n.id)).data("fill", colorOf(n, by, max));
    });
  }

  select(id: number): void {
    const el = this.cy.getElementById(String(id));
    if (el.empty()) return;
    this.cy.elements().unselect();
    el.select();
    this.cy.animate({ center: { eles: el }, zoom: Math.max(this.cy.zoom(), 0.8) }, { duration: 200 });
  }

  highlight(ids: number[]): void {
    this.cy.nodes().removeClass("match");
    for (const id of ids) this.cy.getElementById(String(id)).addClass("match");
  }

  destroy(): void {
    this.cy.destroy();
  }

  private maxOf(nodes: GraphNode[]): number {
    let max = 0;
    for (const n of nodes) max = Math.max(max, (this.colorBy === "gpu_us" ? n.gpu_us : n.cpu_us) ?? 0);
    return max;
  }
}
