// One card per GPU of the trace: the datasheet row it was matched to, the peaks in use, and how it was matched.
// Plus the summary figures of the chosen device.
import type { DeviceInfo, DeviceSpec, DeviceSummary, Dtype, ReasonRow } from "../api";
import { h } from "../dom";
import { gbps, pct, plural, sig, time, UNKNOWN } from "../format";

const PEAK_ORDER = ["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp6", "fp4"];

function safeHttpUrl(source: DeviceSpec["source"]): string | null {
  const url = typeof source === "string" ? source : source?.url;
  if (!url) return null;
  try {
    const u = new URL(url);
    return u.protocol === "https:" || u.protocol === "http:" ? u.href : null;
  } catch {
    return null;
  }
}

function peakList(peaks: Record<string, number | null | undefined>, dtype: Dtype): HTMLElement {
  const keys = [...PEAK_ORDER.filter((k) => k in peaks), ...Object.keys(peaks).filter((k) => !PEAK_ORDER.includes(k))];
  return h(
    "div",
    { class: "peaks" },
    ...keys.map((k) =>
      h(
        "span",
        { class: "peak" + (k === dtype ? " peak-active" : ""), title: `${k} peak from the datasheet` },
        h("span", { class: "peak-dtype", text: k }),
        h("span", { class: "peak-value", text: `${sig(peaks[k] ?? null)}` }),
      ),
    ),
  );
}

/** "rank 3", "ranks 0–3, 6", "all ranks": which ranks a card of an All-ranks selection adds up. */
export function rankLabel(ranks: number[], rankCount: number): string {
  if (ranks.length === rankCount && rankCount > 1) return "all ranks";
  const sorted = [...ranks].sort((a, b) => a - b);
  const runs: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    runs.push(j > i ? `${sorted[i]}–${sorted[j]}` : String(sorted[i]));
    i = j;
  }
  return `${sorted.length === 1 ? "rank" : "ranks"} ${runs.join(", ")}`;
}

export function deviceCard(dev: DeviceInfo, dtype: Dtype, selected: boolean, onSelect?: () => void, ranks?: { of: number[]; count: number }): HTMLElement {
  const spec = dev.spec;
  const who = ranks?.of.length ? rankLabel(ranks.of, ranks.count) : "";
  const head = h(
    "div",
    { class: "card-head" },
    h("span", { class: "badge", text: who ? `GPU ${dev.id} · ${who}` : `GPU ${dev.id}`, title: who ? `This card adds up GPU ${dev.id} of ${who}` : undefined }),
    h("span", { class: "card-title", text: dev.trace_name || "(no name in trace)", title: dev.trace_name }),
  );
  const body: HTMLElement[] = [];
  if (dev.matched && spec) {
    const source = safeHttpUrl(spec.source);
    body.push(
      h(
        "div",
        { class: "card-row" },
        h("span", { class: "card-key", text: "Datasheet" }),
        h("span", { class: "card-val", text: spec.name }),
        source
          ? h("a", {
              class: "card-link",
              text: "source",
              title: typeof spec.source === "object" && spec.source?.note ? spec.source.note : source,
              attrs: { href: source, target: "_blank", rel: "noopener noreferrer" },
            })
          : null,
      ),
    );
    const active = dtype === "auto" ? null : spec.peak_tflops[dtype];
    body.push(
      h(
        "div",
        { class: "card-row" },
        h("span", { class: "card-key", text: "Peak" }),
        h(
          "span",
          { class: "card-val" },
          dtype === "auto"
            ? h("span", { class: "muted", text: "per kernel dtype (auto), TFLOP/s:" })
            : h("strong", {
                text: active != null ? `${sig(active)} TFLOP/s ${dtype}` : `no ${dtype} peak on the datasheet`,
              }),
        ),
      ),
      peakList(spec.peak_tflops, dtype),
      h(
        "div",
        { class: "card-row" },
        h("span", { class: "card-key", text: "DRAM" }),
        h("span", { class: "card-val", text: gbps(spec.dram_gbps) }),
      ),
    );
  } else {
    body.push(h("div", { class: "card-warn", text: "unknown device: efficiency unknown" }));
  }
  if (dev.how) body.push(h("div", { class: "card-how", text: dev.how, title: dev.how }));

  const card = h(
    "div",
    { class: "card device-card" + (selected ? " selected" : "") + (dev.matched ? "" : " unmatched") },
    head,
    ...body,
  );
  if (onSelect) {
    card.classList.add("clickable");
    card.tabIndex = 0;
    card.setAttribute("role", "button");
    card.setAttribute("aria-pressed", String(selected));
    card.addEventListener("click", onSelect);
    card.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        onSelect();
      }
    });
  }
  return card;
}

export function figure(label: string, value: string, sub?: string, title?: string): HTMLElement {
  return h(
    "div",
    { class: "figure", title },
    h("div", { class: "figure-label", text: label }),
    h("div", { class: "figure-value", text: value }),
    sub ? h("div", { class: "figure-sub", text: sub }) : null,
  );
}

/** The one FLOP-coverage definition (analysis/kernels/coverage.py), as every view words it. */
export const FLOP_COVERAGE =
  "share of compute kernel time with a FLOP estimate (kernels other than communication, copies and fills; a known zero is known)";

export function summaryFigures(dev: DeviceInfo): HTMLElement {
  const s: DeviceSummary = dev.summary ?? {
    gpu_busy_us: null,
    kernel_time_us: null,
    memop_time_us: null,
    kernel_count: null,
    byte_time_share: null,
    efficiency: null,
  };
  const effReason = !dev.matched
    ? "unknown device: efficiency unknown"
    : s.efficiency == null
      ? "no kernel has both a FLOP or byte estimate and a datasheet peak"
      : "kernel efficiency against the device's roofline, weighted by kernel time";
  return h(
    "div",
    { class: "figures" },
    figure("GPU busy", time(s.gpu_busy_us), "union of kernels and memcpy/memset"),
    figure("Kernel time", time(s.kernel_time_us), s.kernel_count != null ? plural(s.kernel_count, "kernel call") : undefined),
    figure("Memcpy / memset", time(s.memop_time_us)),
    figure("FLOPs known", pct(s.compute_flop_share ?? null), unratedSummary(s) || "of compute kernel time",
      FLOP_COVERAGE + "; the kernel families without one, with their reason"),
    figure("With a byte estimate", pct(s.byte_time_share), "share of kernel time"),
    figure("With both", pct(s.covered_time_share ?? null), "share of kernel time, under the roof",
      "kernels with a FLOP and a byte estimate whose figures are physically possible"),
    s.over_roof_count
      ? figure("⚠ Over the roof", pct(s.over_roof_time_share ?? null), `${plural(s.over_roof_count, "kernel call")}, left out`,
          "kernels whose estimate implies more than the device can do: left out of the efficiency and totals")
      : null,
    figure("Efficiency", s.efficiency == null ? UNKNOWN : pct(s.efficiency), "time-weighted, vs. roofline", effReason),
  );
}

/** The kernel families with the most compute time without FLOPs: "attention 12 % (op without a FLOP formula)". */
export function unratedSummary(s: DeviceSummary | null | undefined, top = 2): string {
  const rows = (s?.unrated_families ?? []).filter((r) => (r.time_share ?? 0) >= 0.005).slice(0, top);
  return rows.length ? "without: " + rows.map((r) => `${r.family} ${pct(r.time_share)} (${r.reason || "unknown"})`).join("; ") : "";
}

/** The device and its headline figures on one line: the summary of the collapsible header of the Kernel tab. */
export function compactSummary(dev: DeviceInfo, scope?: string): HTMLElement {
  const s = dev.summary;
  const item = (label: string, value: string, title?: string) =>
    h("span", { class: "sum-item", title }, h("span", { class: "sum-label", text: label }), h("span", { class: "sum-value", text: value }));
  return h(
    "span",
    { class: "sum-line" },
    h("span", { class: "badge", text: scope ?? `GPU ${dev.id}`, title: scope ? "every rank's GPU together: what the table below sums" : undefined }),
    h("span", {
      class: "sum-device" + (dev.matched ? "" : " sum-unmatched"),
      text: dev.matched && dev.spec ? dev.spec.name : `${dev.trace_name || "unnamed GPU"}: unknown device`,
      title: dev.how || undefined,
    }),
    item("GPU busy", time(s?.gpu_busy_us ?? null)),
    item("Kernel time", time(s?.kernel_time_us ?? null), s?.kernel_count != null ? plural(s.kernel_count, "kernel call") : undefined),
    item("Efficiency", pct(s?.efficiency ?? null), "time-weighted, vs. roofline"),
    item("Rated", pct(s?.covered_time_share ?? null), "share of kernel time with a FLOP and a byte estimate, under the roof"),
    s?.compute_flop_share != null
      ? item("FLOPs known", pct(s.compute_flop_share), FLOP_COVERAGE +
          (unratedSummary(s, 5) ? "; " + unratedSummary(s, 5) : ""))
      : null,
    s?.over_roof_count ? item("⚠ Over the roof", pct(s.over_roof_time_share ?? null), `${plural(s.over_roof_count, "kernel call")}, left out`) : null,
  );
}

/** Why kernel time has no rated figure: one line per reason with its share of kernel time and a hint. */
export function reasonList(dev: DeviceInfo): HTMLElement | null {
  const rows: ReasonRow[] = dev.summary?.reasons ?? [];
  if (!rows.length) return null;
  return h(
    "div",
    { class: "reasons" },
    h("div", { class: "reasons-title", text: "Kernel time without a rated figure, by reason" }),
    h(
      "table",
      { class: "reasons-table" },
      h(
        "tbody",
        null,
        ...rows.map((r) =>
          h(
            "tr",
            { attrs: { "data-code": r.code } },
            h("td", { class: "num", text: pct(r.time_share) }),
            h("td", { class: "reason-label", text: r.label }),
            h("td", { class: "muted reason-hint", text: r.hint }),
          ),
        ),
      ),
    ),
  );
}
