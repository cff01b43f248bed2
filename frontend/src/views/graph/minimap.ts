// The minimap of the Execution graph: a second, small Cytoscape instance drawing the main graph's nodes (no
// labels, no interaction of its own) with a rectangle for the main viewport; click or drag on it to move there.
// A second instance rather than cytoscape-navigator (last release 2021; it re-renders a PNG thumbnail of the whole
// graph on every change): the same elements drawn with a label-free style cost little, follow the theme through
// the `fill` data the main canvas sets, and add no dependency.
import cytoscape, { type Core } from "cytoscape";
import { h } from "../../dom";

export class GraphMinimap {
  private mini: Core;
  private frame = h("div", { class: "graph-minimap-frame" });
  private onViewport = () => this.drawFrame();

  constructor(
    private host: HTMLElement,
    private main: Core,
  ) {
    const surface = h("div", { class: "graph-minimap-surface" });
    host.append(surface, this.frame);
    this.mini = cytoscape({
      container: surface,
      elements: [],
      layout: { name: "preset" },
      userZoomingEnabled: false,
      userPanningEnabled: false,
      boxSelectionEnabled: false,
      autoungrabify: true,
      autounselectify: true,
      style: [
        { selector: "node", style: { shape: "rectangle", "background-color": "data(fill)", "border-width": 0, label: "" } },
        { selector: ":parent", style: { "background-opacity": 0.12, "border-width": 1, "border-color": "#9aa5b1", padding: "14px" } },
        { selector: "node[?critical]:childless", style: { "background-color": "#d93025" } },
        { selector: "edge", style: { width: 2, "line-color": "#9aa5b1", opacity: 0.5 } },
        { selector: "edge[?critical]", style: { "line-color": "#d93025", opacity: 1, width: 4 } },
      ],
    });
    main.on("viewport resize", this.onViewport);
    const move = (ev: PointerEvent) => this.moveTo(ev);
    surface.addEventListener("pointerdown", (ev) => {
      surface.setPointerCapture(ev.pointerId);
      move(ev);
      surface.addEventListener("pointermove", move);
    });
    surface.addEventListener("pointerup", () => surface.removeEventListener("pointermove", move));
  }

  /** Copy the main graph (after a layout or a recolour) and fit it. */
  sync(): void {
    const json = this.main.elements().jsons() as unknown as cytoscape.ElementDefinition[];
    this.mini.batch(() => {
      this.mini.elements().remove();
      this.mini.add(json.map((e) => ({ group: e.group, data: e.data, position: e.position })));
    });
    this.mini.resize();
    this.mini.fit(undefined, 6);
    this.drawFrame();
  }

  destroy(): void {
    this.main.off("viewport resize", this.onViewport);
    this.mini.destroy();
  }

  /** The main viewport (a box in graph coordinates) drawn in minimap pixels, clipped to the minimap. The minimap
   * only shows while part of the graph is off screen (it would cover nodes for nothing otherwise). */
  private drawFrame(): void {
    const ext = this.main.extent();
    const bb = this.main.elements().boundingBox();
    const whole = bb.x1 >= ext.x1 && bb.y1 >= ext.y1 && bb.x2 <= ext.x2 && bb.y2 <= ext.y2;
    this.host.classList.toggle("graph-minimap-idle", whole);
    const z = this.mini.zoom();
    const pan = this.mini.pan();
    const w = this.host.clientWidth;
    const hgt = this.host.clientHeight;
    const x1 = Math.max(0, ext.x1 * z + pan.x);
    const y1 = Math.max(0, ext.y1 * z + pan.y);
    const x2 = Math.min(w, ext.x2 * z + pan.x);
    const y2 = Math.min(hgt, ext.y2 * z + pan.y);
    Object.assign(this.frame.style, {
      left: `${x1}px`,
      top: `${y1}px`,
      width: `${Math.max(4, x2 - x1)}px`,
      height: `${Math.max(4, y2 - y1)}px`,
    });
  }

  private moveTo(ev: PointerEvent): void {
    const rect = this.host.getBoundingClientRect();
    const z = this.mini.zoom();
    const pan = this.mini.pan();
    const gx = (ev.clientX - rect.left - pan.x) / z;
    const gy = (ev.clientY - rect.top - pan.y) / z;
    const mz = this.main.zoom();
    this.main.pan({ x: this.main.width() / 2 - gx * mz, y: this.main.height() / 2 - gy * mz });
  }
}
