// The details drawer of one kernel: its figures and the CPU ops that launched it, with their input shapes.
import { isAbort, type KernelOp, type KernelOpsResponse, type KernelRow } from "../api";
import { h, replace } from "../dom";
import { bytes, count, flop, gbps, pct, sig, time, UNKNOWN } from "../format";
import { inlineError, loadingState } from "./states";

export interface DetailsOptions {
  /** Restrict the kernel table to the kernels launched by this op. */
  onFilterOp(op: string): void;
  onClose(): void;
  /** When given, the drawer offers "Show on timeline" for the kernel. */
  onShowOnTimeline?(name: string): void;
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
    stat("dtype", r.dtype ?? UNKNOWN),
    stat("Bound", r.bound),
    stat("Occupancy", r.occupancy == null ? UNKNOWN : `${sig(r.occupancy)} %`),
    stat("Registers", r.registers == null ? UNKNOWN : count(r.registers), "per thread"),
    stat("Grid × block", r.grid || r.block ? `${launch(r.grid)} × ${launch(r.block)}` : UNKNOWN),
  );
}

/** A details drawer, hidden at first: a head with its title and a close button, then `body`. */
export function drawer(title: string, body: HTMLElement, onClose: () => void): HTMLElement {
  const el = h(
    "aside",
    { class: "drawer", attrs: { "aria-label": title } },
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
      h("div", { class: "kernel-name", text: name }),
      onTimeline
        ? h("button", { class: "btn btn-small show-on-timeline", text: "Show on timeline", title: "Highlight every launch of this kernel on the Timeline", on: { click: () => onTimeline(name) } })
        : null,
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
        `${count(op.count)} call${op.count === 1 ? "" : "s"} · ${time(op.total_us)} · `,
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
