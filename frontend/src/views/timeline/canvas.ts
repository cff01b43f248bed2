// The Timeline's canvas renderer: a time ruler, ProfilerStep bands, one row per lane (GPU streams, CPU threads by
// depth) with events and per-pixel aggregates, idle gaps shaded, highlighted occurrences and a selected range.
// Pan/zoom: wheel zooms around the pointer (shift+wheel or a horizontal wheel pans), drag pans, shift+drag selects a
// range, click picks an event; keys: W/S or +/- zoom, A/D or arrows pan, 0 fits, Esc clears the selection.
// Our own renderer: a viewport is at most a few thousand rectangles, which plain 2D canvas fills in a few
// milliseconds; a charting library would add hundreds of KB to the bundle for axes and zoom we need in a few lines.
import type { LaneView, Occurrence, TimelineLane, TimelineView } from "./api";
import { canvasPngButton } from "../../export";
import { onTheme, themeColor } from "../../theme";
import { IDLE_CAUSE_COLORS, KERNEL_CLASS_COLORS, rankColor, UNKNOWN_COLOR, withAlpha } from "../../palette";

export type ColorMode = "class" | "efficiency";

export interface PickedEvent {
  lane: number;
  index: number;
  name: string;
  act: number;
  start: number;
  dur: number;
}

export interface CanvasCallbacks {
  /** The visible range changed (pan, zoom, fit): fetch data for it. */
  onViewport(t0: number, t1: number): void;
  onPick(ev: PickedEvent | null): void;
  onRange(t0: number, t1: number): void;
}

const LABEL_W = 190;
const RULER_H = 24;
const STEP_H = 16;
const LANES_TOP = RULER_H + STEP_H;
// Lanes are as tall as what they hold needs: a GPU stream's kernels (their names fit inside), CPU ops, or a thin
// line for a lane with nothing in the span.
const GPU_LANE_H = 30;
const CPU_LANE_H = 20;
const EMPTY_LANE_H = 10;

/** A lane's height in pixels, by what it holds. */
export function laneHeight(lane: TimelineLane): number {
  if (!lane.events) return EMPTY_LANE_H;
  return lane.kind === "gpu" ? GPU_LANE_H : CPU_LANE_H;
}
const MIN_SPAN_US = 0.01;

export const CLASS_COLORS: Readonly<Record<string, string>> = KERNEL_CLASS_COLORS;

/** GPU idle shading by cause (the Overview's rules and colours), by the names TimelineMeta.idle_causes gives. */
export const IDLE_COLORS: Readonly<Record<string, string>> = {
  "data loading": withAlpha(IDLE_CAUSE_COLORS.data_loading, 0.22),
  synchronisation: withAlpha(IDLE_CAUSE_COLORS.sync, 0.18),
  "launch-bound": withAlpha(IDLE_CAUSE_COLORS.launch_bound, 0.3),
  "host-bound": withAlpha(IDLE_CAUSE_COLORS.host_bound, 0.2),
  other: withAlpha(IDLE_CAUSE_COLORS.idle_other, 0.25),
};

/** Colour of a fraction of the roof: red (0) through amber to green (1); over the roof is flagged apart. */
export function efficiencyColor(eff: number | null | undefined): string {
  if (eff == null || !Number.isFinite(eff)) return "#c0c6cc";
  const f = Math.max(0, Math.min(1, eff));
  return `hsl(${Math.round(f * 120)}, 65%, 45%)`;
}

/** Tick step (us) giving about `target` ticks over `span` us: 1, 2 or 5 times a power of ten. */
export function tickStep(span: number, target: number): number {
  const raw = span / Math.max(1, target);
  const pow = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

export function timeLabel(us: number, step: number): string {
  const digits = (unit: number) => Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / unit))));
  if (step >= 1e5) return `${(us / 1e6).toFixed(digits(1e6))} s`;
  if (step >= 100) return `${(us / 1e3).toFixed(digits(1e3))} ms`;
  return `${us.toFixed(digits(1))} µs`;
}

/** One launch flow: from the launch on a CPU op's lane to the kernel's start on its GPU lane (times in µs). */
export interface PickedFlow {
  fromLane: number;
  fromTs: number;
  toLane: number;
  toTs: number;
  /** A forward -> backward link (drawn dashed), not a launch. */
  fwdBwd?: boolean;
}

const MAX_FLOWS = 2000; // drawn at once: more is a solid band that says nothing

/** A stretch of time drawn in one colour by the overlay strip (times in the timeline's time base, µs). */
export interface OverlaySegment {
  start: number;
  dur: number;
  color: string;
}

const OVERLAY_H = 5;

/** Rectangles grouped by colour and filled with one path per colour: a fill per colour rather than per rectangle
 * (and no fillStyle parse per rectangle) keeps a full redraw of a few thousand items in a few milliseconds. */
class RectBatch {
  private byColor = new Map<string, number[]>();

  add(color: string, x: number, y: number, w: number, h: number): void {
    let list = this.byColor.get(color);
    if (!list) this.byColor.set(color, (list = []));
    list.push(x, y, w, h);
  }

  fill(c: CanvasRenderingContext2D): void {
    for (const [color, r] of this.byColor) {
      c.fillStyle = color;
      c.beginPath();
      for (let i = 0; i < r.length; i += 4) c.rect(r[i], r[i + 1], r[i + 2], r[i + 3]);
      c.fill();
    }
    this.byColor.clear();
  }
}

export class TimelineCanvas {
  readonly el: HTMLDivElement;
  private canvas: HTMLCanvasElement;
  private ctx: CanvasRenderingContext2D;
  private lanes: TimelineLane[] = [];
  /** Top of each lane row in pixels, and the bottom of the last (see laneHeight). */
  private tops: number[] = [LANES_TOP];
  private names: string[] = [];
  private classes: string[] = [];
  private idleCauses: string[] = [];
  private data: TimelineView | null = null;
  private byLane = new Map<number, LaneView>();
  private t0 = 0;
  private t1 = 1;
  private duration = 1;
  private mode: ColorMode = "class";
  private highlight: Occurrence[] = [];
  private selected: number | null = null;
  private range: [number, number] | null = null;
  private overlay: OverlaySegment[] = [];
  private labels: string[] = [];
  private rowOf = new Map<number, number>();
  private flows = false;
  private picked: PickedFlow[] = [];
  private drag: { x: number; t0: number; t1: number; shift: boolean; moved: boolean } | null = null;
  private frame = 0;
  private resize: ResizeObserver;
  lastDrawMs = 0;

  private offTheme: () => void;

  constructor(private cb: CanvasCallbacks) {
    this.canvas = document.createElement("canvas");
    this.canvas.className = "tl-canvas";
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("aria-label", "Timeline: wheel to zoom, drag to pan, shift+drag to select a range");
    this.ctx = this.canvas.getContext("2d") as CanvasRenderingContext2D;
    this.el = document.createElement("div");
    this.el.className = "tl-canvas-host";
    this.el.append(this.canvas, canvasPngButton(this.canvas, "timeline"));
    this.el.classList.add("gi-chart");
    // Reachable from the page (as Cytoscape's `cy` is on the graph canvas): end-to-end tests locate events with it.
    (this.canvas as HTMLCanvasElement & { timeline?: TimelineCanvas }).timeline = this;
    this.canvas.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    this.canvas.addEventListener("mousedown", (e) => this.onDown(e));
    window.addEventListener("mousemove", this.onMove);
    window.addEventListener("mouseup", this.onUp);
    this.canvas.addEventListener("keydown", (e) => this.onKey(e));
    this.resize = new ResizeObserver(() => this.redraw());
    this.resize.observe(this.el);
    this.offTheme = onTheme(() => this.redraw());
  }

  /** Pixels of the plot area (what a viewport query's `width` should be). */
  get plotWidth(): number {
    return Math.max(50, Math.floor((this.el.clientWidth || 1000) - LABEL_W));
  }

  /** Top of a lane's row (row = lanes.length: the bottom of the last lane). */
  private top(row: number): number {
    return this.tops[row] ?? LANES_TOP;
  }

  private heightOf(row: number): number {
    return this.top(row + 1) - this.top(row);
  }

  /** The row at a height on the canvas (-1 above the lanes, lanes.length below). */
  private rowAt(y: number): number {
    if (y < LANES_TOP) return -1;
    const row = this.tops.findIndex((t) => t > y);
    return row < 0 ? this.lanes.length : row - 1;
  }

  get viewport(): [number, number] {
    return [this.t0, this.t1];
  }

  setLanes(lanes: TimelineLane[], names: string[], classes: string[], idleCauses: string[], duration: number, labels?: string[]): void {
    this.lanes = lanes;
    this.labels = labels ?? names;
    this.rowOf = new Map(lanes.map((l, row) => [l.id, row]));
    this.tops = [LANES_TOP];
    for (const lane of lanes) this.tops.push(this.tops[this.tops.length - 1] + laneHeight(lane));
    this.idleCauses = idleCauses;
    this.names = names;
    this.classes = classes;
    this.duration = Math.max(duration, MIN_SPAN_US);
    this.redraw();
  }

  setData(view: TimelineView): void {
    this.data = view;
    this.byLane = new Map(view.lanes.map((l) => [l.id, l]));
    this.redraw();
  }

  setMode(mode: ColorMode): void {
    this.mode = mode;
    this.redraw();
  }

  setHighlight(occ: Occurrence[]): void {
    this.highlight = occ;
    this.redraw();
  }

  setSelected(index: number | null): void {
    this.selected = index;
    this.redraw();
  }

  /** Draw the launch -> kernel flow of every GPU event in view (the view's toggle). */
  setFlows(on: boolean): void {
    this.flows = on;
    this.redraw();
  }

  /** The flows of the selected event (its launch, or the kernels a CPU op launched); [] clears them. */
  setPickedFlows(flows: PickedFlow[]): void {
    this.picked = flows;
    this.redraw();
  }

  /** Segments drawn as a strip along the bottom of the step row (the critical path); [] clears it. */
  setOverlay(segments: OverlaySegment[]): void {
    this.overlay = segments;
    this.redraw();
  }

  setRange(range: [number, number] | null): void {
    this.range = range;
    this.redraw();
  }

  /** Show [t0, t1] (clamped to sane bounds) and tell the tab to fetch it. */
  setViewport(t0: number, t1: number): void {
    const span = Math.min(Math.max(t1 - t0, MIN_SPAN_US), this.duration * 1.2);
    const mid = (t0 + t1) / 2;
    const lo = Math.max(-0.1 * this.duration, Math.min(mid - span / 2, this.duration * 1.1 - span));
    this.t0 = lo;
    this.t1 = lo + span;
    this.redraw();
    this.cb.onViewport(this.t0, this.t1);
  }

  fit(): void {
    this.setViewport(0, this.duration);
  }

  zoom(factor: number, anchorT?: number): void {
    const a = anchorT ?? (this.t0 + this.t1) / 2;
    this.setViewport(a - (a - this.t0) * factor, a + (this.t1 - a) * factor);
  }

  pan(fraction: number): void {
    const d = (this.t1 - this.t0) * fraction;
    this.setViewport(this.t0 + d, this.t1 + d);
  }

  // ---------------------------------------------------------------------------------------------- input

  private timeAt(clientX: number): number {
    const rect = this.canvas.getBoundingClientRect();
    const x = clientX - rect.left - LABEL_W;
    return this.t0 + (x / this.plotWidth) * (this.t1 - this.t0);
  }

  private onWheel(e: WheelEvent): void {
    e.preventDefault();
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      this.pan((e.deltaX || e.deltaY) / 1000);
      return;
    }
    this.zoom(Math.exp(e.deltaY * 0.002), this.timeAt(e.clientX));
  }

  private onDown(e: MouseEvent): void {
    if (e.button !== 0) return;
    this.canvas.focus();
    this.drag = { x: e.clientX, t0: this.t0, t1: this.t1, shift: e.shiftKey, moved: false };
    e.preventDefault();
  }

  private onMove = (e: MouseEvent): void => {
    const d = this.drag;
    if (!d) return;
    if (Math.abs(e.clientX - d.x) > 3) d.moved = true;
    if (!d.moved) return;
    if (d.shift) {
      const a = this.timeAt(d.x);
      const b = this.timeAt(e.clientX);
      this.setRange([Math.min(a, b), Math.max(a, b)]);
      return;
    }
    const dt = ((e.clientX - d.x) / this.plotWidth) * (d.t1 - d.t0);
    this.setViewport(d.t0 - dt, d.t1 - dt);
  };

  private onUp = (e: MouseEvent): void => {
    const d = this.drag;
    this.drag = null;
    if (!d) return;
    if (d.moved && d.shift && this.range) this.cb.onRange(this.range[0], this.range[1]);
    if (!d.moved) this.cb.onPick(this.pick(e.clientX, e.clientY));
  };

  private onKey(e: KeyboardEvent): void {
    const k = e.key;
    if (k === "w" || k === "+" || k === "=") this.zoom(0.7);
    else if (k === "s" || k === "-") this.zoom(1 / 0.7);
    else if (k === "a" || k === "ArrowLeft") this.pan(-0.15);
    else if (k === "d" || k === "ArrowRight") this.pan(0.15);
    else if (k === "0" || k === "f") this.fit();
    else if (k === "Escape") {
      this.setRange(null);
      this.cb.onPick(null);
    } else return;
    e.preventDefault();
  }

  /** The event under a point: the narrowest one containing it, within 2 pixels. */
  pick(clientX: number, clientY: number): PickedEvent | null {
    const rect = this.canvas.getBoundingClientRect();
    const row = this.rowAt(clientY - rect.top);
    const lane = this.lanes[row];
    const data = lane ? this.byLane.get(lane.id) : undefined;
    if (!lane || !data) return null;
    const t = this.timeAt(clientX);
    const slack = (2 * (this.t1 - this.t0)) / this.plotWidth;
    const ev = data.events;
    let best = -1;
    for (let i = 0; i < ev.start.length; i++) {
      if (ev.start[i] - slack <= t && t <= ev.start[i] + ev.dur[i] + slack && (best < 0 || ev.dur[i] < ev.dur[best])) best = i;
    }
    if (best < 0) return null;
    return { lane: lane.id, index: ev.index[best], name: this.names[ev.name[best]] ?? "", act: ev.act[best], start: ev.start[best], dur: ev.dur[best] };
  }

  /** Screen position (relative to the canvas) of the middle of an event on a lane, for tests and scrolling. */
  pointOf(lane: number, start: number, dur: number): { x: number; y: number } | null {
    const row = this.lanes.findIndex((l) => l.id === lane);
    if (row < 0) return null;
    return { x: LABEL_W + this.xOf(start + dur / 2), y: this.top(row) + this.heightOf(row) / 2 };
  }

  // ---------------------------------------------------------------------------------------------- drawing

  redraw(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  private xOf(t: number): number {
    return ((t - this.t0) / (this.t1 - this.t0)) * this.plotWidth;
  }

  draw(): void {
    const started = performance.now();
    const dpr = window.devicePixelRatio || 1;
    const w = this.plotWidth + LABEL_W;
    const hgt = this.top(this.lanes.length) + 4;
    if (this.canvas.width !== Math.round(w * dpr) || this.canvas.height !== Math.round(hgt * dpr)) {
      this.canvas.width = Math.round(w * dpr);
      this.canvas.height = Math.round(hgt * dpr);
      this.canvas.style.width = `${w}px`;
      this.canvas.style.height = `${hgt}px`;
    }
    const c = this.ctx;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, w, hgt);
    c.font = "11px system-ui, sans-serif";
    c.textBaseline = "middle";
    c.save();
    c.beginPath();
    c.rect(LABEL_W, 0, this.plotWidth, hgt);
    c.clip();
    c.translate(LABEL_W, 0);
    this.drawSteps(hgt);
    this.drawOverlay();
    this.drawIdle();
    this.lanes.forEach((lane, row) => this.drawLane(lane, this.top(row), this.heightOf(row)));
    this.drawFlows();
    this.drawHighlight();
    this.drawRange(hgt);
    this.drawRuler();
    c.restore();
    this.drawLabels();
    this.lastDrawMs = performance.now() - started;
    this.canvas.dataset.drawMs = this.lastDrawMs.toFixed(2);
  }

  private drawRuler(): void {
    const c = this.ctx;
    const W = this.plotWidth;
    c.fillStyle = themeColor("#f5f7fa");
    c.fillRect(0, 0, W, RULER_H);
    const step = tickStep(this.t1 - this.t0, W / 110);
    c.fillStyle = themeColor("#616e7c");
    c.strokeStyle = themeColor("#cbd2d9");
    c.beginPath();
    for (let t = Math.ceil(this.t0 / step) * step; t <= this.t1; t += step) {
      const x = Math.round(this.xOf(t)) + 0.5;
      c.moveTo(x, RULER_H - 6);
      c.lineTo(x, RULER_H);
      c.fillText(timeLabel(t, step), x + 3, RULER_H / 2 - 2);
    }
    c.stroke();
  }

  private drawSteps(hgt: number): void {
    const c = this.ctx;
    for (const [i, s] of (this.data?.steps ?? []).entries()) {
      const x0 = this.xOf(s.start);
      const x1 = this.xOf(s.end);
      c.fillStyle = i % 2 ? themeColor("#dfe8f3") : themeColor("#eef3f9");
      c.fillRect(x0, RULER_H, Math.max(1, x1 - x0), STEP_H);
      c.fillStyle = "rgba(59, 110, 165, 0.35)";
      c.fillRect(Math.round(x0), RULER_H, 1, hgt - RULER_H);
      if (x1 - x0 > 60) {
        c.fillStyle = "#3b6ea5";
        c.fillText(s.name, Math.max(x0, 0) + 4, RULER_H + STEP_H / 2);
      }
    }
  }

  private drawOverlay(): void {
    const batch = new RectBatch();
    const W = this.plotWidth;
    for (const seg of this.overlay) {
      const x0 = this.xOf(seg.start);
      const x1 = this.xOf(seg.start + seg.dur);
      if (x1 >= 0 && x0 <= W) batch.add(seg.color, x0, RULER_H + STEP_H - OVERLAY_H, Math.max(1, x1 - x0), OVERLAY_H);
    }
    batch.fill(this.ctx);
  }

  /** Idle gaps of each GPU, shaded across its stream lanes in the colour of their cause. */
  private drawIdle(): void {
    const batch = new RectBatch();
    for (const gap of this.data?.idle ?? []) {
      this.lanes.forEach((lane, row) => {
        if (lane.kind !== "gpu" || lane.device !== gap.device || lane.rank !== gap.rank) return;
        const y = this.top(row);
        for (let i = 0; i < gap.start.length; i++) {
          const x0 = this.xOf(gap.start[i]);
          const color = IDLE_COLORS[this.idleCauses[gap.cause[i]]] ?? IDLE_COLORS.other;
          batch.add(color, x0, y, Math.max(1, this.xOf(gap.end[i]) - x0), this.heightOf(row));
        }
      });
    }
    batch.fill(this.ctx);
  }

  private drawLane(lane: TimelineLane, y: number, laneH: number): void {
    const c = this.ctx;
    const data = this.byLane.get(lane.id);
    c.fillStyle = themeColor("#e4e7eb");
    c.fillRect(0, y + laneH - 1, this.plotWidth, 1);
    if (!data || !this.data) return;
    const grey = this.mode === "efficiency";
    const batch = new RectBatch();
    // Aggregated pixels: a bar as high as the pixel's busy fraction, in its dominant class's colour.
    const b = data.bins;
    const px = this.data.px_us;
    for (let i = 0; i < b.px0.length; i++) {
      const ta = this.data.t0 + b.px0[i] * px;
      const tb = this.data.t0 + (b.px1[i] + 1) * px;
      const h = Math.max(2, Math.min(1, b.busy_us[i] / (tb - ta)) * (laneH - 3));
      const x0 = this.xOf(ta);
      batch.add(grey ? "#9aa5b1" : CLASS_COLORS[this.classes[b.cls[i]]] ?? UNKNOWN_COLOR, x0, y + laneH - 1 - h, Math.max(1, this.xOf(tb) - x0), h);
    }
    const ev = data.events;
    const over = new RectBatch();
    const labels: number[] = [];
    let picked = -1;
    for (let i = 0; i < ev.start.length; i++) {
      const x0 = this.xOf(ev.start[i]);
      const wd = Math.max(1, this.xOf(ev.start[i] + ev.dur[i]) - x0);
      if (x0 > this.plotWidth || x0 + wd < 0) continue;
      const cls = this.classes[ev.cls[i]];
      const eff = ev.eff?.[i];
      const color = grey && lane.kind === "gpu" && cls !== "communication" ? efficiencyColor(eff) : CLASS_COLORS[cls] ?? UNKNOWN_COLOR;
      batch.add(color, x0, y + 1, wd, laneH - 3);
      if (grey && eff != null && eff > 1) over.add("#1f2933", x0, y + 1, Math.min(6, wd), 6);
      if (ev.index[i] === this.selected) picked = i;
      if (wd > 36) labels.push(i);
    }
    batch.fill(c);
    over.fill(c);
    if (laneH >= CPU_LANE_H) this.drawLabelsIn(data, labels, y + laneH / 2);
    if (picked >= 0) {
      const x0 = this.xOf(ev.start[picked]);
      c.strokeStyle = "#d9480f";
      c.lineWidth = 2;
      c.strokeRect(x0 + 1, y + 1, Math.max(1, this.xOf(ev.start[picked] + ev.dur[picked]) - x0) - 2, laneH - 3);
      c.lineWidth = 1;
    }
  }

  /** Launch flows: a curve from the launch on the CPU op's lane to the kernel's start, with an arrow head. */
  private drawFlows(): void {
    const all: PickedFlow[] = [];
    if (this.flows && this.data) {
      for (const lane of this.data.lanes) {
        const ev = lane.events;
        for (let i = 0; i < ev.start.length && all.length < MAX_FLOWS; i++) {
          const src = ev.src_lane?.[i];
          const ts = ev.src_ts?.[i];
          if (src != null && ts != null) all.push({ fromLane: src, fromTs: ts, toLane: lane.id, toTs: ev.start[i] });
          // a forward -> backward link, drawn once: from the forward op (the end that starts first)
          const other = ev.fb_lane?.[i];
          const at = ev.fb_ts?.[i];
          if (other != null && at != null && at > ev.start[i]) all.push({ fromLane: lane.id, fromTs: ev.start[i], toLane: other, toTs: at, fwdBwd: true });
        }
      }
    }
    this.strokeFlows(all.filter((f) => !f.fwdBwd), themeColor("#4263eb"), 0.45, 1);
    this.strokeFlows(all.filter((f) => f.fwdBwd), themeColor("#2b8a3e"), 0.5, 1, [4, 3]);
    this.strokeFlows(this.picked.filter((f) => !f.fwdBwd), "#d9480f", 1, 2);
    this.strokeFlows(this.picked.filter((f) => f.fwdBwd), "#2b8a3e", 1, 2, [5, 3]);
  }

  private strokeFlows(flows: PickedFlow[], color: string, alpha: number, width: number, dash: number[] = []): void {
    if (!flows.length) return;
    const c = this.ctx;
    c.save();
    c.setLineDash(dash);
    c.strokeStyle = color;
    c.fillStyle = color;
    c.globalAlpha = alpha;
    c.lineWidth = width;
    for (const f of flows) {
      const a = this.rowOf.get(f.fromLane);
      const b = this.rowOf.get(f.toLane);
      if (a === undefined || b === undefined) continue; // a lane not shown (a deeper CPU level)
      const x0 = this.xOf(f.fromTs);
      const x1 = this.xOf(f.toTs);
      if (Math.max(x0, x1) < 0 || Math.min(x0, x1) > this.plotWidth) continue;
      const y0 = this.top(a) + this.heightOf(a) / 2;
      const y1 = b > a ? this.top(b) + 1 : this.top(b) + this.heightOf(b) - 2;
      const bend = (y1 - y0) / 2;
      c.beginPath();
      c.moveTo(x0, y0);
      c.bezierCurveTo(x0, y0 + bend, x1, y1 - bend, x1, y1);
      c.stroke();
      const dir = y1 > y0 ? -1 : 1;
      c.beginPath();
      c.moveTo(x1, y1);
      c.lineTo(x1 - 3, y1 + 5 * dir);
      c.lineTo(x1 + 3, y1 + 5 * dir);
      c.closePath();
      c.fill();
    }
    c.restore();
  }

  /** Names inside events wide enough to hold some text. */
  private drawLabelsIn(data: LaneView, rows: number[], middle: number): void {
    const c = this.ctx;
    const ev = data.events;
    c.fillStyle = "#fff";
    for (const i of rows) {
      const x0 = this.xOf(ev.start[i]);
      const wd = this.xOf(ev.start[i] + ev.dur[i]) - x0;
      const text = this.labels[ev.name[i]] ?? "";
      const chars = Math.floor((Math.min(wd, this.plotWidth) - 6) / 6.2);
      c.fillText(text.length > chars ? text.slice(0, Math.max(0, chars - 1)) + "…" : text, Math.max(x0, 0) + 3, middle);
    }
  }

  private drawHighlight(): void {
    if (!this.highlight.length) return;
    const c = this.ctx;
    c.strokeStyle = "#f59f00";
    c.fillStyle = "#f59f00";
    c.lineWidth = 2;
    for (const o of this.highlight) {
      const x0 = this.xOf(o.start);
      const wd = Math.max(3, this.xOf(o.end) - x0);
      if (x0 > this.plotWidth || x0 + wd < 0) continue;
      c.fillRect(x0, RULER_H - 5, wd, 5);
      const row = this.lanes.findIndex((l) => l.id === o.lane);
      if (row >= 0) c.strokeRect(x0, this.top(row), wd, this.heightOf(row) - 1);
    }
    c.lineWidth = 1;
  }

  private drawRange(hgt: number): void {
    if (!this.range) return;
    const c = this.ctx;
    const x0 = this.xOf(this.range[0]);
    const x1 = this.xOf(this.range[1]);
    c.fillStyle = "rgba(59, 110, 165, 0.15)";
    c.fillRect(x0, RULER_H, x1 - x0, hgt - RULER_H);
    c.fillStyle = "#3b6ea5";
    c.fillRect(x0, RULER_H, 1, hgt - RULER_H);
    c.fillRect(x1, RULER_H, 1, hgt - RULER_H);
  }

  private drawLabels(): void {
    const c = this.ctx;
    c.fillStyle = themeColor("#fff");
    c.fillRect(0, 0, LABEL_W, this.top(this.lanes.length) + 4);
    c.fillStyle = themeColor("#616e7c");
    c.fillText("time", 6, RULER_H / 2);
    c.fillText("steps", 6, RULER_H + STEP_H / 2);
    this.lanes.forEach((lane, row) => {
      const y = this.top(row) + this.heightOf(row) / 2;
      c.fillStyle = lane.kind === "gpu" ? themeColor("#1f2933") : themeColor("#616e7c");
      const indent = lane.kind === "cpu" ? 6 + 8 * (lane.depth ?? 0) : 6;
      const text = lane.kind === "cpu" && lane.depth ? `depth ${lane.depth}${lane.row ? ` · row ${lane.row + 1}` : ""}` : lane.label;
      c.fillText(text.length > 30 ? text.slice(0, 29) + "…" : text, indent, y);
      if (lane.rank !== undefined) {
        // All ranks stacked: each rank's lanes carry its colour at the edge, so a rank reads as one block.
        c.fillStyle = rankColor(lane.rank);
        c.fillRect(0, this.top(row), 3, this.heightOf(row));
      }
    });
    c.fillStyle = themeColor("#cbd2d9");
    c.fillRect(LABEL_W - 1, 0, 1, this.top(this.lanes.length));
  }

  destroy(): void {
    this.offTheme();
    cancelAnimationFrame(this.frame);
    this.resize.disconnect();
    window.removeEventListener("mousemove", this.onMove);
    window.removeEventListener("mouseup", this.onUp);
    this.el.remove();
  }
}
