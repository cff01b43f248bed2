// Timeline tab: one span's GPU streams and CPU threads on a canvas, level of detail from the server (events wider
// than a pixel, per-pixel aggregates otherwise), steps, idle gaps, classes or % of roof, a range breakdown, find
// and "show on timeline", the kernel details drawer, and "Open in Perfetto". With the worker "All ranks" it stacks
// every rank's stream lanes and top-level CPU lanes on one time base (the server aligns them).
// The viewport lives in the deep link (TensorBoard's URL: gi.timeline.t0, t1, tspan): a reload restores it.
import { api, isAbort, type KernelRow, type Selection } from "../../api";
import { Details, drawer, stat } from "../../components/details";
import { CAUSE_COLORS, CAUSE_LABELS, criticalPathApi } from "../criticalPath/api";
import { openInPerfetto } from "../../components/perfetto";
import { emptyState, inlineError, loadingState, requestErrorState } from "../../components/states";
import { stepChip } from "../../components/stepChip";
import { CLASS_COLORS, IDLE_COLORS, TimelineCanvas, efficiencyColor, type ColorMode, type PickedEvent, type PickedFlow } from "./canvas";
import { opFacts } from "./opDetails";
import { timelineApi, type OpLink, type FindQuery, type FindResult, type FoundName, type FoundOccurrence, type RangeBreakdown, type TimelineLane, type TimelineEvent, type TimelineMeta } from "./api";
import { field, h, replace, select } from "../../dom";
import { count, pct, time } from "../../format";
import { takeTimelineTarget, type TimelineTarget } from "../../nav";
import { ALL_WORKERS, nav, scopeFor, type StepScope } from "../../state";
import type { TabDef, TabView } from "../types";
import { htmlTableExport } from "../../export";
import { tabLink, writeTabLink } from "../../deeplink";

const FETCH_DELAY_MS = 40;
const TAB_ID = "timeline";

/** Deepest CPU nesting level shown for a view covering `frac` of the span: top-level ops until zoomed in. */
export function depthFor(frac: number): number {
  if (frac > 0.25) return 0;
  if (frac > 0.03) return 2;
  return 12;
}

/** The view kept in the deep link (`gi.timeline.t0`, `t1`, `tspan`, the Find (`find` text or `find_key`) and the
 * selected event `ev`): a reload of the page or of the plugin's frame lands on the same view. */
function readHash(): { t0?: number; t1?: number; tspan?: string; find?: string; findKey?: string; ev?: number } {
  const p = tabLink(TAB_ID);
  const num = (v: string | undefined) => (v !== undefined && v !== "" && Number.isFinite(Number(v)) ? Number(v) : undefined);
  return { t0: num(p.t0), t1: num(p.t1), tspan: p.tspan, find: p.find, findKey: p.find_key, ev: num(p.ev) };
}

class TimelineTabView implements TabView {
  private controller = new AbortController();
  private viewController: AbortController | null = null;
  private meta: TimelineMeta | null = null;
  private tspan = "";
  private canvas: TimelineCanvas | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private depth = -1;
  private mode: ColorMode = "class";
  private status = h("div", { class: "tl-status muted small" });
  private notice = h("div", { class: "tl-notice" });
  private viewError = h("div", { class: "tl-view-error" });
  private rangeEl = h("div", { class: "tl-range" });
  private details: Details;
  private cpuBody = h("div", { class: "drawer-body" });
  private cpuDrawer: HTMLElement;
  private scopeChip = h("span", { class: "chips" });
  private pathNote = h("div", { class: "muted small tl-legend tl-path-note" });
  private found: FindResult | null = null;
  private findPos = 0;
  private findLabel = "";
  /** The last typed Find and the names it found: the list to narrow to one name and back. */
  private query: { target: TimelineTarget; names: FoundName[]; total: number } | null = null;
  private unsubscribeNav: () => void;

  constructor(
    private host: HTMLElement,
    private sel: Selection,
  ) {
    this.details = new Details({ onFilterOp: () => undefined, onClose: () => this.pick(null), onShowOnTimeline: (name, key) => void this.find({ name, key }) });
    this.cpuDrawer = drawer("Op details", this.cpuBody, () => this.pick(null));
    for (const side of [this.cpuDrawer, this.details.el]) side.classList.add("side-drawer"); // lanes stay in view
    this.unsubscribeNav = nav.subscribe((_, changed) => {
      if (changed.has("scope") && this.canvas) this.showScope();
    });
    this.start();
  }

  private start(): void {
    const target = takeTimelineTarget();
    void this.load(this.initialSpan(target), target);
  }

  /** What timeline times count from. */
  private get origin(): string {
    return this.stacked ? "from the earliest rank's first event" : "from the span start";
  }

  /** Every rank stacked ("All ranks"): one span per rank, chosen by the server. */
  private get stacked(): boolean {
    return this.sel.worker === ALL_WORKERS;
  }

  /** The span to draw first: a "show on timeline" target's span, the Overview's scoped step's span, else the one
   * in the frame's hash, else the first. */
  private initialSpan(target: TimelineTarget | null): string {
    if (this.stacked) return "";
    if (target?.span) return target.span;
    const scope = nav.get().scope;
    if (scope && scope.run === this.sel.run && scope.worker === this.sel.worker) return scope.span;
    return readHash().tspan ?? "";
  }

  private get spanSel(): Selection {
    return { ...this.sel, span: this.tspan };
  }

  private async load(tspan: string, target: TimelineTarget | null): Promise<void> {
    replace(this.host, loadingState("Loading the timeline…"));
    const signal = this.controller.signal;
    try {
      this.meta = await timelineApi.meta(this.sel, tspan, signal);
    } catch (err) {
      if (signal.aborted || isAbort(err)) return;
      const retry = () => void this.load("", target);
      replace(this.host, requestErrorState("Could not load the timeline of this selection", err, retry));
      return;
    }
    this.tspan = this.meta.span;
    if (!this.meta.events) {
      replace(this.host, emptyState("Nothing to draw", this.stacked ? "No rank has GPU activity or CPU ops." : "This span has no GPU activity and no CPU op."));
      return;
    }
    this.build();
    const hash = readHash();
    const scope = this.renderChip();
    if (target) void this.find(target);
    else if (scope) this.showScope();
    else if (hash.t0 !== undefined && hash.t1 !== undefined && hash.t1 > hash.t0 && hash.tspan === this.tspan) void this.restore(hash);
    else this.canvas?.fit();
  }

  /** The view of the deep link: its Find (highlights), then its range, then its selected event. */
  private async restore(hash: ReturnType<typeof readHash>): Promise<void> {
    if (hash.find || hash.findKey) {
      const box = this.host.querySelector<HTMLInputElement>("input[aria-label='Find on timeline']");
      if (box && hash.find) box.value = hash.find;
      await this.find(hash.findKey ? { name: hash.find ?? "", key: hash.findKey } : { name: hash.find ?? "", partial: true }, false);
    }
    this.canvas?.setViewport(hash.t0 as number, hash.t1 as number);
    if (hash.ev === undefined) return;
    try {
      const ev = await timelineApi.event(this.spanSel, this.tspan, hash.ev, this.controller.signal);
      this.pick({ lane: ev.lane, index: ev.index, name: ev.name, act: ev.act, start: ev.start, dur: ev.dur });
    } catch (err) {
      if (!isAbort(err)) writeTabLink(TAB_ID, { ev: null }); // an event of another trace: drop it
    }
  }

  /** The Overview's step scope when it is a step of the span drawn (never when ranks are stacked). */
  private get scope(): StepScope | null {
    return this.stacked ? null : scopeFor({ ...this.sel, span: this.tspan });
  }

  /** Open on the scoped step's range (trace µs, shifted to the timeline's origin), or the whole span once cleared. */
  private showScope(): void {
    const scope = this.renderChip();
    const origin = this.meta?.origin_us ?? 0;
    if (scope) this.canvas?.setViewport(scope.t0 - origin, scope.t1 - origin);
    else this.canvas?.fit();
  }

  /** Show the chip of the scope that applies to the span drawn (none: no chip); returns that scope. */
  private renderChip(): StepScope | null {
    const scope = this.scope;
    replace(this.scopeChip, stepChip(scope, "The Overview's step: the timeline opened on its time range"));
    return scope;
  }

  private build(): void {
    const meta = this.meta as TimelineMeta;
    this.canvas?.destroy();
    this.canvas = new TimelineCanvas({
      onViewport: (t0, t1) => this.scheduleFetch(t0, t1),
      onPick: (ev) => this.pick(ev),
      onRange: (t0, t1) => void this.showRange(t0, t1),
    });
    this.depth = -1;
    const link = tabLink(TAB_ID); // the view's toggles survive a reload
    this.mode = link.color === "efficiency" ? "efficiency" : "class";
    this.canvas.setMode(this.mode);
    const findBox = h("input", { class: "search", attrs: { type: "search", placeholder: "Find: a name, or a class (gemm, attention, nccl)…", title: "Find: any part of a kernel or op name (raw, demangled or as shown), case-insensitive, or a kernel class: gemm, attention, conv, elementwise, reduction, norm, nccl (communication), memcpy, memset", "aria-label": "Find on timeline", spellcheck: "false" } });
    let searched = "";
    findBox.addEventListener("keydown", (e) => {
      const text = findBox.value.trim();
      if (e.key !== "Enter" || !text) return;
      if (text === searched && this.found) void this.step(this.findPos + (e.shiftKey ? -1 : 1));
      else void this.find({ name: (searched = text), partial: true });
    });
    findBox.addEventListener("search", () => {
      if (!findBox.value.trim()) writeTabLink(TAB_ID, { find: null, find_key: null }); // cleared: out of the link
    });
    const perfettoStatus = h("span", { class: "muted small tl-perfetto-status" });
    const traceUrl = api.traceUrl(this.sel.run, this.sel.worker, this.tspan);
    const controls = h(
      "div",
      { class: "controls" },
      meta.spans.length > 1 ? field("Span", select(meta.spans.map((s) => [s, s] as const), this.tspan, (v) => this.switchSpan(v), { attrs: { "aria-label": "Timeline span" } })) : null,
      field(
        "Colour",
        select(
          [
            ["class", "Kernel class"],
            ["efficiency", "% of roof"],
          ],
          this.mode,
          (v) => this.setMode(v as ColorMode),
          { attrs: { "aria-label": "Colour by" } },
        ),
      ),
      field("Find", findBox),
      this.stacked ? null : this.pathToggle(),
      this.flowsToggle(),
      h("button", { class: "btn", text: "−", title: "Zoom out (S)", on: { click: () => this.canvas?.zoom(1 / 0.6) } }),
      h("button", { class: "btn", text: "+", title: "Zoom in (W)", on: { click: () => this.canvas?.zoom(0.6) } }),
      h("button", { class: "btn", text: "Fit", title: "Show the whole span (0)", on: { click: () => this.canvas?.fit() } }),
      ...(this.stacked ? [] : this.traceButtons(traceUrl, perfettoStatus)),
      perfettoStatus,
      this.scopeChip,
    );
    replace(
      this.host,
      h(
        "div",
        { class: "tl" },
        h(
          "section",
          { class: "panel" },
          h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: "Timeline" }), controls),
          this.legend(),
          this.pathNote,
          this.stacked ? this.ranksNote(meta) : null,
          this.notice,
          this.viewError,
          this.canvas.el,
          this.status,
          h("div", { class: "muted small", text: "Wheel: zoom at the pointer · drag: pan · shift+drag: select a range · click: details · keys W/S zoom, A/D pan, 0 fit" }),
        ),
        h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: "Selected range" })), this.rangeEl),
      ),
      this.details.el,
      this.cpuDrawer,
    );
    replace(this.rangeEl, h("span", { class: "muted", text: "Shift+drag on the timeline to see busy, idle and class times of a range." }));
    this.applyDepth(1);
  }

  /** Launch -> kernel flows of every GPU event in view (the selected event's are always drawn). */
  private flowsToggle(): HTMLElement {
    const box = h("input", { attrs: { type: "checkbox", "aria-label": "Show launch flows" } }) as HTMLInputElement;
    box.checked = tabLink(TAB_ID).flows === "1";
    this.canvas?.setFlows(box.checked);
    box.addEventListener("change", () => {
      this.canvas?.setFlows(box.checked);
      writeTabLink(TAB_ID, { flows: box.checked ? "1" : null });
    });
    return h("label", { class: "field tl-flows-toggle", title: "Draw an arrow from each kernel's launch (on the CPU op that launched it) to the kernel, and a dashed one from each forward op to its backward op" }, h("span", { class: "field-label", text: "Flows" }), box);
  }

  /** The selected event's flows (its launch, or a CPU op's kernels), drawn and listed in its drawer. */
  private async pickFlows(ev: PickedEvent): Promise<TimelineEvent | null> {
    try {
      const full = await timelineApi.event(this.spanSel, this.tspan, ev.index, this.controller.signal);
      const links: PickedFlow[] = [];
      if (full.launched_by) links.push({ fromLane: full.launched_by.lane, fromTs: full.launched_by.ts, toLane: full.lane, toTs: full.start });
      for (const k of full.launched ?? []) links.push({ fromLane: full.lane, fromTs: k.ts, toLane: k.lane, toTs: k.start });
      if (full.backward) links.push({ fromLane: full.lane, fromTs: full.start, toLane: full.backward.lane, toTs: full.backward.start, fwdBwd: true });
      if (full.forward) links.push({ fromLane: full.forward.lane, fromTs: full.forward.start, toLane: full.lane, toTs: full.start, fwdBwd: true });
      this.canvas?.setPickedFlows(links);
      return full;
    } catch (err) {
      if (!isAbort(err)) this.canvas?.setPickedFlows([]);
      return null;
    }
  }

  /** The critical path (as the Execution graph tab lists it) as a strip of cause colours under the steps. */
  private pathToggle(): HTMLElement {
    const box = h("input", { attrs: { type: "checkbox", "aria-label": "Show the critical path" } });
    const note = this.pathNote;
    box.addEventListener("change", async () => {
      replace(note);
      writeTabLink(TAB_ID, { path: box.checked ? "1" : null });
      if (!box.checked) return this.canvas?.setOverlay([]);
      try {
        const path = await criticalPathApi.path(this.spanSel, this.controller.signal);
        if (!path.available) return replace(note, path.reason ?? "no critical path");
        this.canvas?.setOverlay(path.segments.map((s) => ({ start: s.start_us, dur: s.dur_us, color: CAUSE_COLORS[s.cause] ?? "#9aa5b1" })));
        const causes = path.causes.filter((c) => (path.totals[c] ?? 0) > 0);
        const key = causes.map((c) => h("span", { class: "tl-key" }, h("span", { class: "tl-swatch", style: { background: CAUSE_COLORS[c] ?? "#9aa5b1" } }), `${CAUSE_LABELS[c] ?? c} ${time(path.totals[c])}`));
        replace(note, "Critical path (the strip under the steps):", ...key);
      } catch (err) {
        if (!isAbort(err)) replace(note, err instanceof Error ? err.message : String(err));
      }
    });
    if (tabLink(TAB_ID).path === "1") {
      (box as HTMLInputElement).checked = true;
      queueMicrotask(() => box.dispatchEvent(new Event("change")));
    }
    return h("label", { class: "field tl-path-toggle" }, h("span", { class: "field-label", text: "Critical path" }), box);
  }

  /** Download and Perfetto act on one trace: a single span only. */
  private traceButtons(traceUrl: string, perfettoStatus: HTMLElement): HTMLElement[] {
    return [
      h("a", { class: "btn", text: "Download", title: "The augmented trace (.json.gz)", attrs: { href: traceUrl, download: "" } }),
      h("button", {
        class: "btn tl-perfetto",
        text: "Open in Perfetto",
        title: "Open the augmented trace in ui.perfetto.dev (needs internet)",
        on: { click: () => openInPerfetto(traceUrl, `${this.sel.run} / ${this.tspan}`, (text) => replace(perfettoStatus, text)) },
      }),
    ];
  }

  private ranksNote(meta: TimelineMeta): HTMLElement {
    const ranks = meta.ranks ?? [];
    const late = ranks.reduce((m, r) => Math.max(m, r.offset_us), 0);
    return h("div", {
      class: "muted small tl-ranks",
      text: `${ranks.length} ranks stacked on one time base (each trace placed by its absolute start; they start up to ${time(late)} apart) · per rank: its GPU streams, then its threads' top-level ops · times from the earliest rank's first event`,
    });
  }

  private legend(): HTMLElement {
    const meta = this.meta as TimelineMeta;
    const swatch = (color: string, label: string) => h("span", { class: "tl-key" }, h("span", { class: "tl-swatch", style: { background: color } }), label);
    const classes = this.mode === "class" ? meta.classes.map((c) => swatch(CLASS_COLORS[c] ?? "#8d99ae", c)) : [swatch(efficiencyColor(0.05), "< 10 % of roof"), swatch(efficiencyColor(0.5), "50 %"), swatch(efficiencyColor(1), "at the roof"), swatch(efficiencyColor(null), "unknown"), swatch("#1f2933", "dark corner: over the roof (an estimate above the device's peak)"), swatch(CLASS_COLORS.communication, "communication")];
    return h("div", { class: "tl-legend small" }, ...classes, ...meta.idle_causes.map((cause) => swatch(IDLE_COLORS[cause] ?? IDLE_COLORS.other, `idle: ${cause}`)), swatch("#dfe8f3", "ProfilerStep"), swatch("#f59f00", "found"));
  }

  private setMode(mode: ColorMode): void {
    this.mode = mode;
    writeTabLink(TAB_ID, { color: mode === "class" ? null : mode });
    this.canvas?.setMode(mode);
    const old = this.host.querySelector(".tl-legend");
    old?.replaceWith(this.legend());
  }

  private switchSpan(span: string): void {
    this.controller.abort();
    this.controller = new AbortController();
    this.pick(null);
    void this.load(span, null);
  }

  /** CPU lanes nest deeper as the view narrows; GPU lanes are always shown. */
  private applyDepth(frac: number): void {
    const meta = this.meta;
    if (!meta || !this.canvas) return;
    const depth = this.stacked ? 0 : depthFor(frac);
    if (depth === this.depth) return;
    this.depth = depth;
    const lanes = meta.lanes.filter((l) => l.kind === "gpu" || (l.kind === "cpu" && (l.depth ?? 0) <= depth));
    this.canvas.setLanes(lanes, meta.names, meta.classes, meta.idle_causes, meta.duration_us, meta.display_names);
  }

  private visibleLanes(): TimelineLane[] {
    const meta = this.meta as TimelineMeta;
    return meta.lanes.filter((l) => l.kind === "gpu" || (l.kind === "cpu" && (l.depth ?? 0) <= this.depth));
  }

  private scheduleFetch(t0: number, t1: number): void {
    const meta = this.meta;
    if (!meta) return;
    this.applyDepth((t1 - t0) / Math.max(meta.duration_us, 1e-9));
    writeTabLink(TAB_ID, { t0: t0.toFixed(3), t1: t1.toFixed(3), tspan: this.tspan || null });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.fetchView(t0, t1), FETCH_DELAY_MS);
  }

  private async fetchView(t0: number, t1: number): Promise<void> {
    const canvas = this.canvas;
    if (!canvas) return;
    this.viewController?.abort();
    const controller = new AbortController();
    this.viewController = controller;
    const started = performance.now();
    try {
      const lanes = this.visibleLanes().map((l) => l.id);
      const view = await timelineApi.view(this.spanSel, this.tspan, { t0, t1, width: canvas.plotWidth, lanes, depth: this.depth }, controller.signal);
      if (controller.signal.aborted) return;
      const fetched = performance.now() - started;
      canvas.setData(view);
      canvas.draw();
      replace(this.viewError);
      replace(
        this.status,
        `${time(t0)} – ${time(t1)} (${time(t1 - t0)}) · ${count(view.items)} items · query ${fetched.toFixed(0)} ms · draw ${canvas.lastDrawMs.toFixed(1)} ms · ${count(this.meta?.events ?? 0)} events in the span`,
      );
    } catch (err) {
      if (controller.signal.aborted || isAbort(err)) return;
      replace(this.viewError, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  private async showRange(t0: number, t1: number): Promise<void> {
    replace(this.rangeEl, loadingState("Measuring the range…"));
    try {
      const res = await timelineApi.range(this.spanSel, this.tspan, t0, t1, this.controller.signal);
      replace(this.rangeEl, rangeTable(res));
    } catch (err) {
      if (isAbort(err)) return;
      replace(this.rangeEl, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  /** Highlight every occurrence of a name (by its key), or of every name containing a typed part, and land on the
   * longest one (its details open); the occurrences are stepped through in time order. */
  private async find(target: TimelineTarget, land = true): Promise<void> {
    const signal = this.controller.signal;
    writeTabLink(TAB_ID, { find: target.key ? (target.name.length <= 200 ? target.name : null) : target.name, find_key: target.key ?? null });
    try {
      let res = await timelineApi.find(this.spanSel, this.tspan, findQuery(target), signal);
      // A name named without its key (another tab's link): the exact name when one matches, else every match.
      const exact = !target.key && !target.partial ? res.names.find((n) => n.name === target.name) : undefined;
      if (exact && res.names.length > 1) res = await timelineApi.find(this.spanSel, this.tspan, { name_key: exact.key }, signal);
      this.found = res;
      if (target.partial) this.query = { target, names: res.names, total: res.names_total };
      else if (!this.query?.names.some((n) => n.key === target.key)) this.query = null;
      this.findLabel = target.key || exact ? (res.names[0]?.display_name ?? target.name) : target.name;
      if (!res.longest) {
        const where = this.stacked ? "on any rank" : `in span ${this.tspan}${(this.meta?.spans.length ?? 0) > 1 ? ": choose another span" : ""}`;
        replace(this.notice, inlineError(`“${shortText(target.name)}” does not occur ${where} (Find looks in the raw, demangled and short names).`));
        this.canvas?.setHighlight([]);
        return;
      }
      this.canvas?.setHighlight(res.occurrences);
      if (!land) return replace(this.notice, this.findBar(res)); // restored from the link: its range and event follow
      const longest = res.occurrences.findIndex((o) => o.index === res.longest?.index);
      await this.step(longest >= 0 ? longest : 0, res.longest);
    } catch (err) {
      if (isAbort(err)) return;
      replace(this.notice, inlineError(err instanceof Error ? err.message : String(err)));
    }
  }

  /** Show the `pos`-th occurrence found (or `occ` when it is not among those listed) and open its details. */
  private async step(pos: number, occ?: FoundOccurrence): Promise<void> {
    const res = this.found;
    if (!res) return;
    const n = res.occurrences.length;
    this.findPos = n ? ((pos % n) + n) % n : 0;
    const at = occ && res.occurrences[this.findPos]?.index !== occ.index ? occ : res.occurrences[this.findPos];
    if (!at) return;
    const pad = Math.max((at.end - at.start) * 2, 0.05);
    this.canvas?.setViewport(at.start - pad, at.end + pad);
    replace(this.notice, this.findBar(res));
    const ev = await timelineApi.event(this.spanSel, this.tspan, at.index, this.controller.signal);
    this.pick({ lane: at.lane, index: at.index, name: ev.name, act: ev.act, start: ev.start, dur: ev.dur });
  }

  /** "‹ 3 / 24 ›" over the occurrences in time order, what was found, and the names found to narrow to one. */
  private findBar(res: FindResult): HTMLElement {
    const n = res.occurrences.length;
    const names = res.names_total === 1 ? `“${shortText(this.findLabel)}”` : `${count(res.names_total)} names matching “${shortText(this.findLabel)}”`;
    const query = this.query;
    const picker =
      query && query.names.length > 1
        ? select(
            [["", `All ${count(query.total)} names`] as const, ...query.names.map((m) => [m.key, `${m.display_name} · ${count(m.count)} · ${time(m.total_us)}`] as const)],
            res.names.length === 1 ? res.names[0].key : "",
            (key) => {
              const one = query.names.find((m) => m.key === key);
              void this.find(one ? { name: one.name, key } : query.target);
            },
            { attrs: { "aria-label": "Names found" }, class: "tl-found-names" },
          )
        : null;
    return h(
      "div",
      { class: "muted small tl-found" },
      h("button", { class: "btn btn-small tl-prev", text: "‹", title: "Previous occurrence (Shift+Enter in Find)", on: { click: () => void this.step(this.findPos - 1) } }),
      h("span", { class: "tl-found-pos", text: `${count(this.findPos + 1)} / ${count(n)}` }),
      h("button", { class: "btn btn-small tl-next", text: "›", title: "Next occurrence (Enter in Find)", on: { click: () => void this.step(this.findPos + 1) } }),
      h("span", { text: ` ${count(res.count)} occurrence${res.count === 1 ? "" : "s"} of ${names} highlighted, in time order${res.truncated ? ` (the first ${count(n)} listed)` : ""}.` }),
      picker,
    );
  }

  /** Zoom to a linked op (a CPU op's forward or backward op) and open its details. */
  private async goTo(link: OpLink): Promise<void> {
    const pad = Math.max(link.dur * 2, 0.05);
    this.canvas?.setViewport(link.start - pad, link.start + link.dur + pad);
    const ev = await timelineApi.event(this.spanSel, this.tspan, link.index, this.controller.signal);
    this.pick({ lane: ev.lane, index: ev.index, name: ev.name, act: ev.act, start: ev.start, dur: ev.dur });
  }

  private pick(ev: PickedEvent | null): void {
    this.canvas?.setSelected(ev ? ev.index : null);
    writeTabLink(TAB_ID, { ev: ev ? String(ev.index) : null });
    this.canvas?.setPickedFlows([]);
    if (!ev) {
      this.details.close();
      this.cpuDrawer.hidden = true;
      return;
    }
    const lane = this.meta?.lanes[ev.lane];
    if (lane?.kind === "gpu") {
      this.cpuDrawer.hidden = true;
      void this.openKernel(ev, lane);
    } else {
      this.details.close();
      this.openOp(ev, lane);
    }
  }

  /** The kernel table's drawer for a GPU event: its kernel row (all its launches) and launching ops, in the
   * event's own span (its rank's, when stacked). */
  private async openKernel(ev: PickedEvent, lane: TimelineLane): Promise<void> {
    let row: KernelRow | null = null;
    const device = lane.device ?? 0;
    const key = this.keyOf(ev.name);
    const sel = lane.worker && lane.span ? { ...this.sel, worker: lane.worker, span: lane.span } : this.spanSel;
    try {
      const q = { device, dtype: "auto" as const, group: "name" as const, filter: "", nameKey: key, op: "", sort: "total_us", order: "desc" as const, offset: 0, limit: 50 };
      const res = await api.kernels(sel, q, this.controller.signal);
      row = res.rows.find((r) => r.name === ev.name) ?? null;
    } catch (err) {
      if (isAbort(err)) return;
    }
    this.details.open(ev.name, row, (signal) => api.kernelOps(sel, device, ev.name, signal, key));
    this.details.el.querySelector(".kernel-name")?.after(h("div", { class: "muted small tl-occurrence", text: `This launch: ${time(ev.dur)} at ${time(ev.start)} ${this.origin}${lane.rank !== undefined ? ` (rank ${lane.rank})` : ""}` }));
    const full = await this.pickFlows(ev);
    if (full?.launched_by) {
      this.details.el.querySelector(".tl-occurrence")?.after(h("div", { class: "muted small tl-launched-by", text: `Launched by ${full.launched_by.name} (the arrow), ${time(full.start - full.launched_by.ts)} after its launch call began`, title: full.launched_by.name }));
    }
  }

  /** A name's key from the timeline's meta (names are sent back by key: they can be any length). */
  private keyOf(name: string): string | undefined {
    const meta = this.meta;
    const code = meta ? meta.names.indexOf(name) : -1;
    return code >= 0 ? meta?.name_keys[code] : undefined;
  }

  private openOp(ev: PickedEvent, lane: TimelineLane | undefined): void {
    this.cpuDrawer.hidden = false;
    const kernels = h("div", { class: "tl-op-kernels" });
    const about = h("div", { class: "tl-op-about" });
    void this.pickFlows(ev).then((full) => {
      if (full) replace(about, ...opFacts(full, (link) => void this.goTo(link)));
      const rows = full?.launched ?? [];
      if (!rows.length) return replace(kernels, h("div", { class: "muted small", text: "Launched no GPU work (or none this trace links to it)." }));
      const names = this.meta?.display_names ?? [];
      const shown = (name: string) => names[this.meta?.names.indexOf(name) ?? -1] ?? name;
      replace(
        kernels,
        h("div", { class: "field-label", text: `Kernels it launched (${count(full?.launched_total ?? rows.length)}, the arrows)` }),
        h("table", { class: "tl-kernels-table" },
          h("thead", null, h("tr", null, h("th", { text: "Kernel" }), h("th", { text: "Duration" }), h("th", { text: "% of roof" }))),
          h("tbody", null, ...rows.map((k) => h("tr", null, h("td", { text: shown(k.name), title: k.name }), h("td", { class: "num", text: time(k.dur) }), h("td", { class: "num", text: k.efficiency == null ? "—" : pct(k.efficiency) }))))),
      );
    });
    replace(
      this.cpuBody,
      h("div", { class: "kernel-name", text: ev.name, title: ev.name }),
      h("div", { class: "stats" }, stat("Duration", time(ev.dur)), stat("Start", time(ev.start), this.origin), lane?.rank !== undefined ? stat("Rank", String(lane.rank)) : null, stat("Thread", lane?.tid ?? "—"), stat("Depth", String(lane?.depth ?? 0))),
      h("button", { class: "btn btn-small", text: "Find every occurrence", on: { click: () => void this.find({ name: ev.name, key: this.keyOf(ev.name) }) } }),
      about,
      kernels,
    );
  }

  update(sel: Selection): void {
    this.teardown();
    if (sel.run !== this.sel.run || sel.worker !== this.sel.worker) {
      // the linked span, range, Find and event belong to the selection left (the view's toggles stay)
      writeTabLink(TAB_ID, { tspan: null, t0: null, t1: null, ev: null, find: null, find_key: null });
    }
    this.sel = sel;
    this.controller = new AbortController();
    this.start();
  }

  private teardown(): void {
    this.controller.abort();
    this.viewController?.abort();
    clearTimeout(this.timer);
    this.details.close();
    this.cpuDrawer.hidden = true;
    this.canvas?.destroy();
    this.canvas = null;
  }

  destroy(): void {
    this.unsubscribeNav();
    this.teardown();
    this.details.destroy();
    this.cpuDrawer.remove();
    replace(this.host);
  }
}

/** Find by key when the target has one; else by a part of the name (a long name's first 400 characters, a
 * parameter's limit: the exact name is then picked among the names found). */
export function findQuery(target: TimelineTarget): FindQuery {
  return target.key ? { name_key: target.key } : { q: target.name.slice(0, 400) };
}

/** A name cut for a sentence (the full text stays in the drawer and titles). */
function shortText(text: string, max = 120): string {
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

function rangeTable(res: RangeBreakdown): HTMLElement {
  const rows = [...res.devices, ...res.lanes].map((r) =>
    h(
      "tr",
      null,
      h("td", { text: r.label }),
      h("td", { class: "num", text: time(r.busy_us) }),
      h("td", { class: "num", text: pct(r.busy_us / res.range_us) }),
      h("td", { class: "num", text: time(r.idle_us) }),
      h("td", { class: "small", text: Object.entries(r.classes).sort((a, b) => b[1] - a[1]).map(([c, us]) => `${c} ${time(us)}`).join(" · ") }),
    ),
  );
  const table = h("table", { class: "inputs tl-range-table" }, h("thead", null, h("tr", null, ...["Lane", "Busy", "Busy %", "Idle", "By class"].map((t) => h("th", { text: t })))), h("tbody", null, ...rows));
  return h(
    "div",
    null,
    h("div", { class: "muted small", text: `${time(res.t0)} – ${time(res.t1)} (${time(res.range_us)}). A GPU's row is the union of its streams; a lane's classes may overlap on other lanes.` }),
    table,
    htmlTableExport(table, "timeline-range"),
  );
}

export const timelineTab: TabDef = {
  id: TAB_ID,
  label: "Timeline",
  mount: (host, sel) => new TimelineTabView(host, sel),
};

