// The details panel of one execution-graph node: figures, schema, inputs and outputs, linked kernels.
import { h } from "../../dom";
import { count, flop, pct, tflops, time, UNKNOWN } from "../../format";
import { timelineButton } from "../../nav";
import { stat } from "../../components/details";
import type { EtArgs, GraphKernel, NodeDetails } from "./api";

function text(v: unknown): string {
  if (v === null || v === undefined) return "";
  return typeof v === "string" ? v : (JSON.stringify(v) ?? "");
}

/** One row per argument: type, shape, value (a tensor's value is [id, storage, offset, numel, itemsize, device]). */
function argsTable(args: EtArgs, empty: string): HTMLElement {
  const n = Math.max(args.types.length, args.shapes.length, args.values.length);
  if (n === 0) return h("div", { class: "muted small", text: empty });
  const rows: HTMLElement[] = [];
  for (let i = 0; i < n; i++) {
    rows.push(
      h(
        "tr",
        null,
        h("td", { class: "num", text: String(i) }),
        h("td", { class: "mono", text: args.types[i] ?? UNKNOWN }),
        h("td", { class: "mono", text: text(args.shapes[i]) }),
        h("td", { class: "mono", text: text(args.values[i]) }),
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

function kernelsTable(kernels: GraphKernel[], span: string): HTMLElement {
  return h(
    "table",
    { class: "inputs graph-kernels" },
    h("thead", null, h("tr", null, ...["Kernel", "Time", "TFLOP/s", "% peak", "Efficiency", ""].map((t) => h("th", { text: t })))),
    h(
      "tbody",
      null,
      ...kernels.map((k) =>
        h(
          "tr",
          null,
          h("td", { class: "mono", text: k.name, title: k.op ? `launched by ${k.op}` : undefined }),
          h("td", { class: "num", text: time(k.dur) }),
          h("td", { class: "num", text: tflops(k.tflops) }),
          h("td", { class: "num", text: pct(k.pct_peak) }),
          h("td", { class: "num", text: pct(k.efficiency) }),
          h("td", null, timelineButton(k.name, span, "timeline")),
        ),
      ),
    ),
  );
}

function section(title: string, ...body: HTMLElement[]): HTMLElement {
  return h("div", null, h("h3", { class: "section-title", text: title }), ...body);
}

export interface NodeActions {
  onExpand(id: number): void;
  onCollapse(id: number): void;
  onReveal(id: number): void;
}

/** The body of the details drawer for one node (of the header's `span`: "show on timeline" looks there). */
export function nodeDetails(d: NodeDetails, actions: NodeActions, span: string): HTMLElement {
  const s = d.summary;
  const buttons = h(
    "div",
    { class: "graph-actions" },
    s.expandable ? h("button", { class: "btn btn-small", text: "Expand", on: { click: () => actions.onExpand(s.id) } }) : null,
    s.parent !== null
      ? h("button", { class: "btn btn-small", text: "Collapse into parent", on: { click: () => actions.onCollapse(s.parent as number) } })
      : null,
  );
  const parts: HTMLElement[] = [
    h("div", { class: "kernel-name", text: s.label }),
    d.path.length ? h("div", { class: "muted small graph-path", text: d.path.join(" › ") }) : h("span"),
    h(
      "div",
      { class: "stats" },
      stat("CPU time", time(s.cpu_us)),
      stat("GPU time", s.kernels ? time(s.gpu_us) : UNKNOWN),
      stat("Kernels", count(s.kernels)),
      stat("FLOPs", s.flops ? flop(s.flops) : UNKNOWN),
      stat("Efficiency", pct(s.efficiency), "time-weighted efficiency of the kernels below"),
      stat("ET nodes", count(s.size)),
      stat("On critical path", s.critical ? "yes (outlined)" : s.critical_ops ? `no; holds ${count(s.critical_ops)} op${s.critical_ops === 1 ? "" : "s"} of it` : "no"),
    ),
    buttons,
  ];
  if (d.et) {
    const et = d.et;
    parts.push(
      section("Schema", h("code", { class: "mono graph-schema", text: et.op_schema || "(no op schema: an annotation or autograd node)" })),
      h("div", { class: "muted small", text: `ET id ${et.id} · rf_id ${et.rf_id} · thread ${et.tid} · seq ${et.seq_id}` }),
      section("Inputs", argsTable(et.inputs, "No inputs.")),
      section("Outputs", argsTable(et.outputs, "No outputs.")),
    );
    const k = d.kineto;
    parts.push(
      h("div", {
        class: "muted small",
        text: k ? `Linked to the Kineto trace by ${k.method}: ${time(k.dur)} on the CPU.` : "Not linked to a Kineto event.",
      }),
    );
    if (d.forward) {
      const fwd = d.forward;
      parts.push(
        h(
          "div",
          { class: "small" },
          "Backward of ",
          h("button", { class: "btn btn-small", text: `${fwd.name} (#${fwd.id})`, on: { click: () => actions.onReveal(fwd.id) } }),
        ),
      );
    }
    const kernels = d.kernels ?? [];
    parts.push(section("Linked kernels", kernels.length ? kernelsTable(kernels, span) : h("div", { class: "muted small", text: "No GPU kernel linked to this node." })));
  }
  return h("div", { class: "graph-details" }, ...parts);
}
