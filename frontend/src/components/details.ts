// The details drawer of one kernel: its figures and the CPU ops that launched it, with their input shapes.
import { isAbort, type KernelOp, type KernelOpsResponse, type KernelRow } from "../api";
import { h, replace } from "../dom";
import { BOUND_HELP, boundLabel, bytes, COMM_HELP, count, flop, gbps, occupancy, pct, plural, sig, time, UNKNOWN } from "../format";
import { isTransfer, roofMark, shownName } from "./kernelTable";
import { inlineError, loadingState } from "./states";

export interface DetailsOptions {
  /** Restrict the kernel table to the kernels launched by this op. */
  onFilterOp(op: string): void;
  onClose(): void;
  /** When given, the drawer offers "Show on timeline" for the kernel. */
  onShowOnTimeline?(name: string, key?: string): void;
}

function dimsText(d: unknown): string {
  if (Array.isArray(d)) return "[" + d.map(dimsText).join(", ") + "]";
  if (d === null || d === undefined) return "";
  return String(d);
}

function valueText(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  return JSON.stringify(v) ?? "";
}

function inputsTable(op: KernelOp): HTMLElement {
  const dims = op.input_dims ?? [];
  const types = op.input_types ?? [];
  const concrete = op.concrete_inputs ?? [];
  const n = Math.max(dims.length, types.length, concrete.length);
  if (n === 0) return h("div", { class: "muted small", text: "No input shapes recorded (profile with record_shapes=True)." });
  const rows: HTMLElement[] = [];
  for (let i = 0; i < n; i++) {
    const shape = dimsText(dims[i]);
    const type = types[i] ?? "";
    const value = valueText(concrete[i]);
    rows.push(
      h(
        "tr",
        null,
        h("td", { class: "num", text: String(i) }),
        h("td", { class: "mono", text: type || UNKNOWN }),
        h("td", { class: "mono", text: shape === "[]" && !type ? UNKNOWN : shape || UNKNOWN }),
        h("td", { class: "mono", text: value }),
      ),
    );
  }
  return h(
    "table",
    { class: "inputs" },
    h("thead", null, h("tr", null, ...["#", "Type", "Shape", "Value"].map((t) => h("th", { text: t })))),
    h("tbody", null, ...rows),
  );
}

function launch(v: string | null): string {
  return v ? v.replace(/\s+/g, "").replace(/,/g, ", ") : UNKNOWN;
}

/** A name block with a Copy button (the raw name, or its demangled form). */
export function nameBlock(label: string, name: string): HTMLElement {
  const copy = h("button", {
    class: "btn btn-small name-copy",
    text: "Copy",
    title: `Copy the ${label.toLowerCase()} to the clipboard`,
    on: {
      click: () =>
        void navigator.clipboard?.writeText(name).then(
          () => (copy.textContent = "Copied"),
          () => (copy.textContent = "Select and copy"),
        ),
    },
  });
  return h(
    "div",
    { class: "name-block" },
    h("div", { class: "name-block-head" }, h("span", { class: "stat-label", text: label }), copy),
    h("div", { class: "kernel-name", text: name }),
  );
}

/** The names of a kernel: its short name as a title, then the demangled and the raw name. */
export function kernelNames(name: string, row: KernelRow | null): HTMLElement[] {
  const short = row ? shownName(row) : name;
  const parts: HTMLElement[] = [h("div", { class: "drawer-name", text: short, title: short })];
  if (row?.demangled && row.demangled !== name) parts.push(nameBlock("Demangled name", row.demangled));
  parts.push(nameBlock("Raw name (as in the trace)", name));
  return parts;
}

export function stat(label: string, value: string, title?: string): HTMLElement {
  return h("div", { class: "stat", title }, h("span", { class: "stat-label", text: label }), h("span", { class: "stat-value", text: value }));
}

function rowStats(r: KernelRow): HTMLElement {
  const flopWhy = r.flops == null ? r.flops_reason || "no FLOP estimate" : undefined;
  const byteWhy = r.bytes == null ? r.bytes_reason || "no byte estimate" : undefined;
  return h(
    "div",
    { class: "stats" },
    stat("Calls", count(r.count)),
    stat("Total", time(r.total_us)),
    stat("Mean", time(r.mean_us), `min ${time(r.min_us)} · max ${time(r.max_us)}`),
    stat("Share", pct(r.time_share)),
    stat("FLOPs", flop(r.flops), flopWhy),
    stat("Bytes", bytes(r.bytes), byteWhy),
    stat("TFLOP/s", sig(r.tflops), flopWhy),
    stat("GB/s", gbps(r.gbps), byteWhy),
    stat("% of peak", pct(r.pct_peak), flopWhy),
    stat("% of DRAM", pct(r.pct_dram), byteWhy),
    stat("Class", r.kernel_class ?? UNKNOWN),
    isTransfer(r) ? null : stat("dtype", r.dtype ?? UNKNOWN),
    stat("Bound", boundLabel(r.bound) ?? UNKNOWN, r.bound === "communication" ? COMM_HELP : boundLabel(r.bound) ? BOUND_HELP : "FLOPs or bytes unknown: no roofline side"),
    stat("Occupancy", occupancy(r.occupancy), occupancy(r.occupancy) === UNKNOWN ? "not in the trace" : undefined),
    stat("Registers", r.registers == null ? UNKNOWN : count(r.registers), "per thread"),
    stat("Grid × block", r.grid || r.block ? `${launch(r.grid)} × ${launch(r.block)}` : UNKNOWN),
    stat("Role", r.role ?? UNKNOWN, "what the kernel does for its op: only compute (or its op's own work) kernels take the op's FLOPs"),
    stat("Covered", pct(r.covered_share ?? null), "share of time in calls with both estimates: the rates describe those calls"),
  );
}

/** The over-the-roof warning of a row, with its likely cause; null when the row is plausible. */
function roofWarning(r: KernelRow): HTMLElement | null {
  if (!r.over_roof && !(r.over_roof_share && r.over_roof_share > 0)) return null;
  const share = r.over_roof ? "all its rated calls" : `${pct(r.over_roof_share ?? null)} of its time`;
  return h(
    "div",
    { class: "card-warn roof-warning" },
    roofMark({ over_roof: true, roof_cause: r.roof_cause }),
    ` Over the roof in ${share}: the estimate implies more than the device can do, so those calls are left out of the device's efficiency.`,
    r.roof_cause ? h("div", { class: "muted", text: `Likely cause: ${r.roof_cause}` }) : null,
  );
}

/** A grip along the drawer's inner edge: dragging it sets a bottom sheet's height, or the width of a drawer shown as
 *  a side panel (`side-drawer`: its grip is its left edge); one preference each for every drawer. */
function sheetGrip(): HTMLElement {
  const grip = h("div", { class: "drawer-grip", title: "Drag to resize the details", attrs: { role: "separator", "aria-label": "Resize details" } });
  grip.addEventListener("pointerdown", (down) => {
    down.preventDefault();
    grip.setPointerCapture(down.pointerId);
    const side = grip.parentElement?.classList.contains("side-drawer") ?? false;
    const move = (e: PointerEvent) => {
      if (side) {
        const px = Math.round(Math.min(window.innerWidth * 0.7, Math.max(260, window.innerWidth - e.clientX)));
        document.documentElement.style.setProperty("--gi-side", `${px}px`);
        return;
      }
      const px = Math.round(Math.min(window.innerHeight - 80, Math.max(96, window.innerHeight - e.clientY)));
      document.documentElement.style.setProperty("--gi-sheet", `${px}px`);
    };
    const up = () => {
      grip.removeEventListener("pointermove", move);
      grip.removeEventListener("pointerup", up);
    };
    grip.addEventListener("pointermove", move);
    grip.addEventListener("pointerup", up);
  });
  return grip;
}

export function drawer(title: string, body: HTMLElement, onClose: () => void): HTMLElement {
  const el = h(
    "aside",
    { class: "drawer", attrs: { "aria-label": title } },
    sheetGrip(),
    h(
      "div",
      { class: "drawer-head" },
      h("span", { class: "drawer-title", text: title }),
      h("button", {
        class: "btn btn-icon",
        text: "×",
        title: "Close",
        attrs: { "aria-label": "Close details" },
        on: { click: onClose },
      }),
    ),
    body,
  );
  el.hidden = true;
  return el;
}

export class Details {
  readonly el: HTMLElement;
  private body = h("div", { class: "drawer-body" });
  private controller: AbortController | null = null;

  constructor(private opts: DetailsOptions) {
    this.el = drawer("Kernel details", this.body, () => this.opts.onClose());
  }

  /** Show one kernel; `load` fetches its launching ops. */
  open(name: string, row: KernelRow | null, load: (signal: AbortSignal) => Promise<KernelOpsResponse>): void {
    this.controller?.abort();
    const controller = new AbortController();
    this.controller = controller;
    this.el.hidden = false;
    const ops = h("div", { class: "ops" }, loadingState("Loading the ops that launched this kernel…"));
    const onTimeline = this.opts.onShowOnTimeline;
    replace(
      this.body,
      ...kernelNames(name, row),
      onTimeline
        ? h("button", { class: "btn btn-small show-on-timeline", text: "Show on timeline", title: "Highlight every launch of this kernel on the Timeline", on: { click: () => onTimeline(name, row?.name_key) } })
        : null,
      row ? roofWarning(row) : null,
      row ? rowStats(row) : null,
      h("h3", { class: "section-title", text: "Launching ops" }),
      ops,
    );
    load(controller.signal).then(
      (res) => {
        if (controller.signal.aborted) return;
        if (!res.ops.length) {
          replace(ops, h("div", { class: "muted", text: "No CPU op was found for this kernel (no correlation in the trace)." }));
          return;
        }
        replace(ops, ...res.ops.map((op) => this.opBlock(op)));
      },
      (err: unknown) => {
        if (controller.signal.aborted || isAbort(err)) return;
        replace(ops, inlineError(err instanceof Error ? err.message : String(err)));
      },
    );
  }

  private opBlock(op: KernelOp): HTMLElement {
    return h(
      "div",
      { class: "op-block" },
      h(
        "div",
        { class: "op-head" },
        h("code", { class: "op-name", text: op.op }),
        h("button", {
          class: "btn btn-small",
          text: "Filter table",
          title: "Show only the kernels this op launched",
          on: { click: () => this.opts.onFilterOp(op.op) },
        }),
      ),
      h(
        "div",
        { class: "op-meta" },
        `${plural(op.count, "call")} · ${time(op.total_us)} · `,
        op.flops == null
          ? h("span", { class: "cell-unknown", text: `FLOPs ${UNKNOWN}`, title: op.flops_reason || "no FLOP estimate" })
          : `${flop(op.flops)}`,
        op.flops == null && op.flops_reason ? h("span", { class: "muted", text: ` (${op.flops_reason})` }) : null,
      ),
      inputsTable(op),
    );
  }

  close(): void {
    this.controller?.abort();
    this.controller = null;
    this.el.hidden = true;
    replace(this.body);
  }

  get isOpen(): boolean {
    return !this.el.hidden;
  }

  destroy(): void {
    this.close();
    this.el.remove();
  }
}
