// What the Op details drawer shows of a CPU op beyond its time: its inputs (shapes, dtypes, scalar values, when
// the profile recorded shapes), the nn.Module calls around it (when it recorded the stack) and the op at the other
// end of its forward -> backward link. All of it comes from the span's stored timeline index.
import { h } from "../../dom";
import { time } from "../../format";
import type { OpLink, TimelineEvent } from "./api";

function text(value: unknown): string {
  if (value === null || value === undefined || value === "") return "—";
  return Array.isArray(value) ? `[${value.map((v) => (Array.isArray(v) ? `[${v.join(", ")}]` : String(v))).join(", ")}]` : String(value);
}

/** One row per input: its shape, dtype and (for a scalar) value. */
function inputsTable(inputs: NonNullable<TimelineEvent["inputs"]>): HTMLElement | null {
  const dims = inputs.dims ?? [];
  const types = inputs.types ?? [];
  const values = inputs.concrete ?? [];
  const n = Math.max(dims.length, types.length);
  if (!n) return null;
  const rows = Array.from({ length: n }, (_, i) =>
    h("tr", null, h("td", { class: "num", text: String(i) }), h("td", { class: "mono", text: text(dims[i]) }), h("td", { text: text(types[i]) }), h("td", { class: "mono", text: text(values[i]) })),
  );
  return h(
    "div",
    { class: "tl-op-inputs" },
    h("div", { class: "field-label", text: "Inputs" }),
    h("table", { class: "tl-kernels-table" }, h("thead", null, h("tr", null, h("th", { text: "#" }), h("th", { text: "Shape" }), h("th", { text: "Dtype" }), h("th", { text: "Value" }))), h("tbody", null, ...rows)),
  );
}

function linkLine(label: string, link: OpLink, onLink: (link: OpLink) => void): HTMLElement {
  return h(
    "div",
    { class: "small tl-op-link" },
    h("span", { class: "muted", text: `${label}: ` }),
    h("button", { class: "btn btn-small", text: link.name, title: `${link.name} · ${time(link.dur)} · the dashed arrow`, on: { click: () => onLink(link) } }),
  );
}

/** The drawer's parts for one CPU op (empty when the trace recorded none of it). */
export function opFacts(ev: TimelineEvent, onLink: (link: OpLink) => void): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (ev.backward) out.push(linkLine("Its backward op", ev.backward, onLink));
  if (ev.forward) out.push(linkLine("Backward of", ev.forward, onLink));
  const inputs = ev.inputs ? inputsTable(ev.inputs) : null;
  if (inputs) out.push(inputs);
  if (ev.stack?.length) {
    out.push(
      h("div", { class: "tl-op-stack" }, h("div", { class: "field-label", text: "Module stack (outermost first)" }), h("ol", { class: "mono small" }, ...ev.stack.map((frame) => h("li", { text: frame })))),
    );
  }
  if (ev.call_stack?.length) {
    out.push(
      h("div", { class: "tl-op-stack" }, h("div", { class: "field-label", text: "Python call stack (outermost first)" }), h("ol", { class: "mono small" }, ...ev.call_stack.map((frame) => h("li", { text: frame })))),
    );
  }
  if (ev.module_path) out.push(h("div", { class: "small" }, h("span", { class: "muted", text: "Module hierarchy: " }), h("span", { class: "mono", text: ev.module_path })));
  if (!out.length) out.push(h("div", { class: "muted small", text: "No shapes or stack recorded for this op (profile with record_shapes=True, with_stack=True)." }));
  return out;
}
