// The Diff tab's verdict panel: B's median step time against A's under the comparison rule (first step of each
// span and hiccups left out, robust noise band, minimum steps), and what accounts for the change: the kernel
// classes and top kernels (or ops), time per step before / after and their share of the change.
import { h, middleEllipsis } from "../../dom";
import { pct } from "../../format";

export interface StepSample {
  steps: number;
  kept: number;
  median: number | null;
  band: number | null;
  warmup: { index: number; value: number }[];
  outliers: { index: number; value: number }[];
}

export interface DiffVerdict {
  a: StepSample;
  b: StepSample;
  worse: number | null;
  /** % of A's median; positive: B is worse. */
  change_pct: number | null;
  band: number | null;
  beyond_noise: boolean | null;
  judgeable: boolean;
  rule: string;
  threshold: number;
  verdict: "regression" | "improvement" | "none" | "undecided";
  label: string;
  unit: string;
}

export interface AttributionEntry {
  class: string;
  name?: string;
  display_name?: string;
  status?: string;
  a_ms: number;
  b_ms: number;
  delta_ms: number;
  share_of_change: number | null;
}

export interface DiffAttribution {
  unit: string;
  by: "kernel" | "op";
  a_ms: number;
  b_ms: number;
  delta_ms: number;
  classes: AttributionEntry[];
  top: AttributionEntry[];
  source: string;
}

export function ms(v: number | null | undefined, digits = 3): string {
  return v === null || v === undefined || !Number.isFinite(v) ? "—" : `${v.toFixed(digits)} ms`;
}

function signedMs(v: number): string {
  return `${v > 0 ? "+" : v < 0 ? "−" : ""}${Math.abs(v).toFixed(3)} ms`;
}

const VERDICT_TEXT: Record<DiffVerdict["verdict"], string> = {
  regression: "Regression",
  improvement: "Improvement",
  none: "No change beyond the noise",
  undecided: "Cannot judge",
};

function left(s: StepSample): string {
  const out = [
    ...s.warmup.map((w) => `first ${ms(w.value)}`),
    ...s.outliers.map((o) => `hiccup ${ms(o.value)}`),
  ];
  return `${s.kept} of ${s.steps} steps kept${out.length ? ` (left out: ${out.join(", ")})` : ""}`;
}

function headline(v: DiffVerdict): string {
  const change = v.change_pct === null ? "" : `${v.change_pct >= 0 ? "+" : "−"}${Math.abs(v.change_pct).toFixed(1)} % slower`;
  const band = v.band === null ? "noise band unknown" : `noise band ±${ms(v.band)}`;
  return `median ${v.label} ${ms(v.a.median)} → ${ms(v.b.median)} (${change}; ${band}; threshold ${v.threshold} %)`;
}

function entryTable(rows: AttributionEntry[], first: string, name: (r: AttributionEntry) => HTMLElement | string): HTMLElement {
  const head = h("tr", {}, ...[first, "A", "B", "Δ", "part of Δ"].map((t) => h("th", { text: t })));
  const body = rows.map((r) =>
    h(
      "tr",
      {},
      h("td", {}, name(r)),
      h("td", { text: ms(r.a_ms) }),
      h("td", { text: ms(r.b_ms) }),
      h("td", { class: r.delta_ms > 0 ? "delta delta-slower" : r.delta_ms < 0 ? "delta delta-faster" : "delta delta-same", text: signedMs(r.delta_ms) }),
      h("td", { text: r.share_of_change === null ? "—" : pct(r.share_of_change) }),
    ),
  );
  return h("table", { class: "gi-stat-table" }, h("thead", {}, head), h("tbody", {}, ...body));
}

/** The verdict panel (null when the route gave no verdict: a side without steps). */
export function verdictPanel(v: DiffVerdict | null | undefined, att: DiffAttribution | undefined): HTMLElement | null {
  if (!v) return null;
  const kind = v.verdict;
  const changed = kind === "regression" || kind === "improvement";
  const row = att && att.by === "op" ? "Op + shapes" : "Kernel";
  return h(
    "section",
    { class: `panel diff-verdict diff-verdict-${kind}`, attrs: { "aria-label": "Step time verdict" } },
    h(
      "div",
      { class: "panel-head" },
      h("h2", { class: "panel-title", text: `Step time: ${VERDICT_TEXT[kind]}` }),
      h("span", { class: "muted small", text: "B against A", title: v.rule }),
    ),
    h("div", { class: "diff-verdict-line", text: headline(v) }),
    h("div", { class: "muted small", text: `A: ${left(v.a)} · B: ${left(v.b)}` }),
    kind === "undecided"
      ? h("div", { class: "muted small", text: "Too few steps to judge: record more steps per span (active=8 or more)." })
      : null,
    changed && att && att.classes.length
      ? h(
          "div",
          { class: "diff-attribution" },
          h("h3", { class: "diff-attribution-title", text: `What accounts for the change (${att.unit})` }),
          h("div", { class: "ov-table-wrap" }, entryTable(att.classes, "Kernel class", (r) => r.class)),
          h(
            "div",
            { class: "ov-table-wrap" },
            entryTable(att.top, row, (r) => middleEllipsis(r.display_name || r.name || "", r.name || "")),
          ),
          h("div", { class: "muted small", text: att.source }),
        )
      : null,
  );
}
