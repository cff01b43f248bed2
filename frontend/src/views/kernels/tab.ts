// Kernel efficiency tab: device cards, summary figures, the kernel table and the roofline of one device.
import {
  api,
  DTYPES,
  isAbort,
  type DeviceInfo,
  type DeviceSummary,
  type Dtype,
  type Group,
  type KernelRow,
  type Order,
  type Selection,
} from "../../api";
import { compactSummary, deviceCard, reasonList, summaryFigures } from "../../components/deviceCard";
import { Details } from "../../components/details";
import { KernelTable, type PageRequest } from "../../components/kernelTable";
import { Roofline } from "./roofline";
import { emptyState, inlineError, loadingState, requestErrorState } from "../../components/states";
import { stepChip } from "../../components/stepChip";
import { onLinkChange, tabLink, writeTabLink, type Link } from "../../deeplink";
import { debounce, field, h, replace, select } from "../../dom";
import { plural } from "../../format";
import { showOnTimeline } from "../../nav";
import { ALL_WORKERS, loadPrefs, nav, savePrefs, scopeFor, Store } from "../../state";
import type { TabDef, TabView } from "../types";

export const TOP_N = [25, 50, 100, 200, 500] as const;

const DTYPE_LABELS: Record<Dtype, string> = {
  auto: "auto (per kernel)",
  fp32: "fp32",
  tf32: "tf32",
  bf16: "bf16",
  fp16: "fp16",
  fp8: "fp8",
  fp64: "fp64",
  int8: "int8",
  fp6: "fp6 (MX)",
  fp4: "fp4 (MX / NVFP4)",
};

interface ViewState {
  device: number;
  dtype: Dtype;
  group: Group;
  filter: string;
  op: string;
  topN: number;
  selected: string | null;
  /** The table's sort as "field" (most first) or "field.asc"; "" is the default, total time most first. */
  sort: string;
  page: number;
}

const SORT_LINK = /^([a-z][a-z0-9_]*)(?:\.(asc|desc))?$/;
const DEFAULT_SORT = "total_us";

/** The table's sort from the view's "field[.asc]" text. */
function sortOf(v: ViewState): { field: string; dir: Order } {
  const m = SORT_LINK.exec(v.sort) ?? SORT_LINK.exec(DEFAULT_SORT)!;
  return { field: m[1], dir: m[2] === "asc" ? "asc" : "desc" };
}

const TAB_ID = "kernels";

/** The view a deep link names (its "kernels.*" entries), over `base`; invalid values are ignored. */
function viewFromLink(link: Link, base: ViewState): ViewState {
  const device = Number(link.dev);
  return {
    ...base,
    device: link.dev !== undefined && Number.isInteger(device) && device >= 0 ? device : base.device,
    dtype: DTYPES.includes(link.dtype as Dtype) ? (link.dtype as Dtype) : base.dtype,
    group: link.group === "op" || link.group === "name" ? link.group : base.group,
    filter: link.filter ?? "",
    op: link.op ?? "",
    selected: link.sel ?? null,
    sort: link.sort !== undefined && SORT_LINK.test(link.sort) ? link.sort : "",
    page: Number.isInteger(Number(link.page)) && Number(link.page) > 1 ? Number(link.page) : 1,
  };
}

/** The deep-link entries of a view (defaults left out to keep URLs short). */
function linkOf(v: ViewState): Record<string, string | null> {
  return {
    dev: v.device ? String(v.device) : null,
    dtype: v.dtype === "auto" ? null : v.dtype,
    group: v.group === "name" ? null : v.group,
    filter: v.filter || null,
    op: v.op || null,
    sel: v.selected,
    sort: v.sort || null,
    page: v.page > 1 ? String(v.page) : null,
  };
}

function initialView(): ViewState {
  const prefs = loadPrefs();
  const focus = nav.get().focus; // an Overview evidence link: open the table filtered to its kernels
  if (focus) nav.set({ focus: null });
  const base: ViewState = {
    device: 0,
    dtype: DTYPES.includes(prefs.dtype) ? prefs.dtype : "auto",
    group: prefs.group === "op" ? "op" : "name",
    filter: "",
    op: "",
    topN: (TOP_N as readonly number[]).includes(prefs.topN) ? prefs.topN : 100,
    selected: null,
    sort: "",
    page: 1,
  };
  const linked = viewFromLink(tabLink(TAB_ID), base);
  return focus ? { ...linked, filter: focus.filter, op: focus.op, selected: null, page: 1 } : linked;
}

/** Whether the device and summary cards start unfolded: as the user last left them, else folded (the table first). */
function cardsOpen(): boolean {
  return loadPrefs().kernelCards === "open";
}

class KernelEfficiencyView implements TabView {
  private view = new Store<ViewState>(initialView());
  private devices: DeviceInfo[] = [];
  private controller = new AbortController();
  private rooflineController: AbortController | null = null;
  private table: KernelTable | null = null;
  private roofline: Roofline | null = null;
  private details: Details;
  private rows = new Map<string, KernelRow>();
  private unsubscribe: () => void;
  private destroyed = false;
  private pendingSelection: string | null = null;

  // Parts of the layout that are rebuilt as the state changes.
  private topEl = h("section", { class: "ke-top" });
  private cardsEl = h("div", { class: "cards" });
  private figuresEl = h("div", { class: "figures-host" });
  private tableStatus = h("div", { class: "table-status" });
  private chartStatus = h("div", { class: "chart-status" });
  private opChip = h("span", { class: "chips" });
  private scopeChip = h("span", { class: "chips" });
  private summaryLine = h("span", { class: "sum-host" });
  private filterBox: HTMLInputElement | null = null;
  private unsubscribeNav: () => void;
  private unsubscribeLink: () => void;

  constructor(
    private host: HTMLElement,
    private sel: Selection,
  ) {
    this.details = new Details({
      onFilterOp: (op) => this.view.set({ op }),
      onClose: () => this.view.set({ selected: null }),
      onShowOnTimeline: (name, key) => showOnTimeline({ name, key, device: this.view.get().device }),
    });
    this.pendingSelection = this.view.get().selected;
    this.unsubscribe = this.view.subscribe((state, changed) => this.onChange(state, changed));
    writeTabLink(TAB_ID, linkOf(this.view.get()));
    // Back / forward between two views of this tab (the shell handles a change of tab or selection).
    this.unsubscribeLink = onLinkChange((link) => {
      const own: Record<string, string> = {};
      for (const [k, v] of Object.entries(link)) if (k.startsWith(`${TAB_ID}.`)) own[k.slice(TAB_ID.length + 1)] = v;
      if (link.tab !== TAB_ID) return;
      const next = viewFromLink(own, this.view.get());
      if (this.filterBox && this.filterBox.value !== next.filter) this.filterBox.value = next.filter;
      this.view.set(next);
    });
    this.unsubscribeNav = nav.subscribe((_, changed) => {
      if (!changed.has("scope") || !this.table) return;
      this.renderScopeChip();
      void this.table.reload();
    });
    void this.load();
  }

  private async load(): Promise<void> {
    replace(this.host, loadingState("Loading devices…"));
    const signal = this.controller.signal;
    try {
      const res = await api.devices(this.sel, signal);
      if (signal.aborted) return;
      this.devices = res.devices;
      this.allRanksSummary = res.all_ranks ?? null;
      this.deviceRanks = res.device_ranks ?? {};
    } catch (err) {
      if (signal.aborted || isAbort(err)) return;
      replace(
        this.host,
        requestErrorState("Could not load the devices of this selection", err, () => this.load()),
      );
      return;
    }
    if (!this.devices.length) {
      replace(
        this.host,
        emptyState(
          "No GPU kernels in this selection",
          "The trace has no GPU device: was it profiled with ProfilerActivity.CUDA (or a ROCm build), and did the GPU run any kernel?",
        ),
      );
      return;
    }
    const state = this.view.get();
    if (!this.devices.some((d) => d.id === state.device)) this.view.set({ device: this.devices[0].id });
    this.build();
  }

  /** "All ranks": the table aggregates every rank (the server groups across their GPUs). */
  /** Every rank's GPU together ("All ranks"): the summary above the table is of what the table sums. */
  private allRanksSummary: DeviceSummary | null = null;
  /** All ranks: per GPU id, the ranks its card adds up (the card names them). */
  private deviceRanks: Record<string, number[]> = {};

  private get allRanks(): boolean {
    return this.sel.worker === ALL_WORKERS;
  }

  private get device(): DeviceInfo | undefined {
    return this.devices.find((d) => d.id === this.view.get().device);
  }

  private build(): void {
    const state = this.view.get();
    const filterBox = h("input", {
      class: "search",
      attrs: { type: "search", placeholder: "Filter kernel names…", "aria-label": "Filter kernel names", spellcheck: "false" },
    });
    filterBox.value = state.filter;
    this.filterBox = filterBox;
    const setFilter = debounce((v: string) => this.view.set({ filter: v.trim() }), 300);
    filterBox.addEventListener("input", () => setFilter(filterBox.value));

    const controls = h(
      "div",
      { class: "controls" },
      field(
        "dtype",
        select(
          DTYPES.map((d) => [d, DTYPE_LABELS[d]] as const),
          state.dtype,
          (v) => this.view.set({ dtype: v as Dtype }),
          { title: "Which datasheet peak each kernel is rated against" },
        ),
      ),
      field(
        "Group by",
        select(
          [
            ["name", "Kernel name"],
            ["op", "Launching op + kernel"],
          ],
          state.group,
          (v) => this.view.set({ group: v as Group }),
        ),
      ),
      field("Filter", filterBox),
      this.opChip,
      this.scopeChip,
      field(
        "Per page",
        select(
          TOP_N.map((n) => [String(n), String(n)] as const),
          String(state.topN),
          (v) => this.view.set({ topN: Number(v) }),
          { title: "Kernels per page" },
        ),
      ),
    );

    const tableHost = h("div", { class: "table-host" });
    replace(this.topEl, this.cardsEl, this.figuresEl);
    this.roofline = new Roofline({ onSelect: (name) => this.view.set({ selected: name }) });

    // The device and summary cards fold into one line above the table, which comes first and takes the height.
    const cards = h("details", { class: "ke-summary" }, h("summary", { class: "ke-summary-head" }, this.summaryLine), this.topEl);
    cards.open = cardsOpen();
    cards.addEventListener("toggle", () => savePrefs({ kernelCards: cards.open ? "open" : "closed" }));

    replace(
      this.host,
      h(
        "div",
        { class: "ke" },
        cards,
        h(
          "section",
          { class: "panel panel-table" },
          h("div", { class: "panel-head" }, h("h2", { class: "panel-title", text: "Kernels" }), this.tableStatus, controls),
          tableHost,
        ),
        h(
          "section",
          { class: "panel" },
          h(
            "div",
            { class: "panel-head" },
            h("h2", { class: "panel-title", text: "Roofline" }),
            h("span", { class: "muted small", text: "log-log · click a point for details" }),
          ),
          this.chartStatus,
          this.roofline.el,
        ),
      ),
      this.details.el,
    );

    this.table = new KernelTable(tableHost, {
      pageSize: state.topN,
      group: state.group,
      initialSort: sortOf(state),
      initialPage: state.page,
      fetchPage: (req) => {
        this.noteSortAndPage(req);
        const s = this.view.get();
        return api.kernels(
          this.sel,
          { device: s.device, dtype: s.dtype, group: s.group, filter: s.filter, op: s.op, ...this.stepWindow(), ...req },
          this.controller.signal,
        );
      },
      deviceMatched: () => this.device?.matched ?? false,
      rankSpread: this.allRanks,
      onSelect: (row) => this.view.set({ selected: row.name }),
      onLoaded: (total, dtype) => this.showTableStatus(total, dtype),
      onError: (message) => replace(this.tableStatus, inlineError(message)),
      onRows: (rows) => {
        this.rows = new Map(rows.map((r) => [r.name, r]));
        this.restoreSelection();
      },
    });

    this.renderDevice();
    this.renderOpChip();
    this.renderScopeChip();
    void this.loadRoofline();
  }

  /** The sort and page the table asks for go into the link (a reload shows the same page in the same order). */
  private noteSortAndPage(req: PageRequest): void {
    const sort = req.sort === DEFAULT_SORT && req.order === "desc" ? "" : req.order === "asc" ? `${req.sort}.asc` : req.sort;
    const page = Math.floor(req.offset / Math.max(1, req.limit)) + 1;
    const s = this.view.get();
    if (s.sort !== sort || s.page !== page) this.view.set({ sort, page });
  }

  /** A deep link's selected kernel: open its details once the first page (and so its row, when there) is in. */
  private restoreSelection(): void {
    const name = this.pendingSelection;
    this.pendingSelection = null;
    if (!name || this.view.get().selected !== name) return;
    requestAnimationFrame(() => {
      this.table?.select(name, this.details.el);
      this.roofline?.select(name);
      this.openDetails(name);
    });
  }

  private showTableStatus(total: number, dtype: string): void {
    const s = this.view.get();
    const parts = [s.group === "op" ? plural(total, "op + kernel pair") : plural(total, "kernel")];
    if (s.filter) parts.push(`matching “${s.filter}”`);
    if (s.op) parts.push(`launched by ${s.op}`);
    parts.push(s.dtype === "auto" ? "rated against each kernel's own dtype" : `rated against the ${dtype} peak`);
    if (this.allRanks) parts.push("all ranks: one row per kernel over every rank's GPU, with its time per rank (min / median / max)");
    replace(this.tableStatus, h("span", { class: "muted", text: parts.join(" · ") }));
  }

  private ranksOf(id: number): { of: number[]; count: number } | undefined {
    if (!this.allRanks) return undefined;
    const count = new Set(Object.values(this.deviceRanks).flat()).size;
    const of = this.deviceRanks[String(id)];
    return of?.length ? { of, count } : undefined;
  }

  private renderDevice(): void {
    const state = this.view.get();
    const many = this.devices.length > 1;
    // One or two GPUs: cards in a column beside the figures; more: a row of cards above them.
    this.topEl.classList.toggle("ke-top-wide", this.devices.length > 2);
    replace(
      this.cardsEl,
      ...this.devices.map((d) =>
        deviceCard(d, state.dtype, many && d.id === state.device, many ? () => this.view.set({ device: d.id }) : undefined, this.ranksOf(d.id)),
      ),
    );
    const dev = this.device;
    const whole = this.allRanks && this.allRanksSummary && dev ? { ...dev, summary: this.allRanksSummary } : null;
    const shown = whole ?? dev;
    replace(this.figuresEl, shown ? summaryFigures(shown) : null, shown ? reasonList(shown) : null);
    replace(this.summaryLine, shown ? compactSummary(shown, whole ? `All ranks · ${this.devices.length} GPUs` : undefined) : null);
  }

  private renderOpChip(): void {
    const op = this.view.get().op;
    replace(
      this.opChip,
      op
        ? h(
            "span",
            { class: "chip", title: "Only kernels launched by this op" },
            h("span", { text: `op: ${op}` }),
            h("button", {
              class: "chip-x",
              text: "×",
              attrs: { "aria-label": "Remove the op filter" },
              on: { click: () => this.view.set({ op: "" }) },
            }),
          )
        : null,
    );
  }

  /** The Overview's step scope, when it applies to this selection: the kernel table shows only that step. */
  private stepWindow(): { t0?: number; t1?: number } {
    const scope = scopeFor(this.sel);
    return scope ? { t0: scope.t0, t1: scope.t1 } : {};
  }

  private renderScopeChip(): void {
    replace(this.scopeChip, stepChip(scopeFor(this.sel), "Only kernels that started in this step (chosen in the Overview)"));
  }

  private async loadRoofline(): Promise<void> {
    const roofline = this.roofline;
    if (!roofline) return;
    this.rooflineController?.abort();
    const controller = new AbortController();
    this.rooflineController = controller;
    const abortAll = () => controller.abort();
    this.controller.signal.addEventListener("abort", abortAll);
    replace(this.chartStatus, h("span", { class: "muted small", text: "Loading roofline…" }));
    const { device, dtype } = this.view.get();
    try {
      const res = await api.roofline(this.sel, device, dtype, controller.signal);
      if (controller.signal.aborted) return;
      replace(this.chartStatus);
      roofline.setData(res);
      roofline.select(this.view.get().selected);
    } catch (err) {
      if (controller.signal.aborted || isAbort(err)) return;
      replace(this.chartStatus, inlineError(err instanceof Error ? err.message : String(err)));
    } finally {
      this.controller.signal.removeEventListener("abort", abortAll);
    }
  }

  private openDetails(name: string): void {
    const device = this.view.get().device;
    const row = this.rows.get(name) ?? null;
    this.details.open(name, row, (signal) => api.kernelOps(this.sel, device, name, signal, row?.name_key));
  }

  private onChange(state: ViewState, changed: ReadonlySet<keyof ViewState>): void {
    const has = (k: keyof ViewState) => changed.has(k);
    if (has("dtype") || has("group") || has("topN")) savePrefs({ dtype: state.dtype, group: state.group, topN: state.topN });
    if (!this.destroyed) writeTabLink(TAB_ID, linkOf(state));
    if (!this.table) return; // still loading the devices
    if (has("device") || has("dtype")) {
      this.renderDevice();
      void this.loadRoofline();
      if (state.selected !== null) this.view.set({ selected: null });
    }
    if (has("op")) this.renderOpChip();
    if (has("topN")) void this.table.setPageSize(state.topN);
    if (has("group")) void this.table.setGroup(state.group);
    else if (has("device") || has("dtype") || has("filter") || has("op")) void this.table.reload();
    if (has("selected")) {
      this.table.select(state.selected, this.details.el);
      this.roofline?.select(state.selected);
      if (state.selected === null) this.details.close();
      else this.openDetails(state.selected);
    }
  }

  update(sel: Selection): void {
    this.teardown();
    this.sel = sel;
    this.controller = new AbortController();
    this.view.set({ selected: null, op: "" });
    void this.load();
  }

  private teardown(): void {
    this.controller.abort();
    this.rooflineController?.abort();
    this.table?.destroy();
    this.table = null;
    this.roofline?.destroy();
    this.roofline = null;
    this.details.close();
    this.rows.clear();
  }

  destroy(): void {
    this.destroyed = true;
    this.teardown();
    this.unsubscribe();
    this.unsubscribeNav();
    this.unsubscribeLink();
    this.details.destroy();
    replace(this.host);
  }
}

export const kernelEfficiencyTab: TabDef = {
  id: "kernels",
  label: "Kernel efficiency",
  mount: (host, sel) => new KernelEfficiencyView(host, sel),
};
