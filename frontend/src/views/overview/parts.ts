// Overview building blocks: headline cards, the per-step breakdown table and the recommendation list.
import type { OverviewCategory, OverviewHeadline, Recommendation, StepRow } from "../../api";
import { h } from "../../dom";
import { count, pct, plural, sig, time, tflops, UNKNOWN } from "../../format";
import { timelineButton } from "../../nav";
import { figure, FLOP_COVERAGE } from "../../components/deviceCard";
import { CATEGORY_COLORS, spanNamer } from "./charts";
import { UNKNOWN_COLOR } from "../../palette";
import { htmlTableExport } from "../../export";

/** A CPU-only run's split (analysis/overview/cpu.py) has its own categories: CPU ops, collectives, idle threads. */
export function isCpuOnly(categories: OverviewCategory[]): boolean {
  return categories.some((c) => c.key === "cpu_ops");
}

/** A CPU-only run's cards: what the CPU did per step, no GPU figure. */
function cpuCards(hl: OverviewHeadline): HTMLElement {
  const st = hl.step_time_us;
  const part = (key: string) => (hl.wall_us ? (hl.breakdown_us[key] ?? 0) / hl.wall_us : null);
  return h(
    "div",
    { class: "figures ov-cards" },
    figure("Step time", time(st.mean), `${plural(hl.steps, "step")} · median ${time(st.median)} · p90 ${time(st.p90)}`),
    figure("CPU ops", pct(part("cpu_ops")), "share of step time some CPU op ran", "no GPU activity in this run: CPU time only"),
    figure("Collectives (exposed)", pct(part("cpu_collectives")), "in a collective, no CPU op running", "waiting for peers or the transfer"),
    figure("Data loading", pct(part("cpu_data_loading")), "inside a DataLoader __next__"),
    figure("Idle threads", pct(part("cpu_idle")), "no op on any thread", "sleeping or blocked outside the profiler's view"),
  );
}

export function headlineCards(hl: OverviewHeadline, cpuOnly = false): HTMLElement {
  if (cpuOnly) return cpuCards(hl);
  const st = hl.step_time_us;
  const mfuSub =
    hl.mfu == null
      ? "no FLOP estimate or no datasheet peak"
      : `of ${hl.mfu_dtype} peak ${sig(hl.peak_tflops)} TFLOP/s · FLOPs known for ${pct(hl.compute_flop_share)} of compute kernel time`;
  return h(
    "div",
    { class: "figures ov-cards" },
    figure(
      "Step time",
      time(st.mean),
      `${plural(hl.steps, "step")} · median ${time(st.median)} · p90 ${time(st.p90)} · spread ${time(st.spread)}`,
      "mean wall time of the step windows (ProfilerStep#N to the next step)",
    ),
    figure("GPU busy", pct(hl.gpu_busy_pct), "share of step time any kernel or copy ran", "interval union over streams"),
    figure("Achieved", hl.tflops == null ? UNKNOWN : tflops(hl.tflops), "estimated FLOPs / step time"),
    figure("MFU", hl.mfu == null ? UNKNOWN : pct(hl.mfu), mfuSub, "model FLOPs utilisation: a lower bound when FLOPs are not known for every kernel. FLOPs known: " + FLOP_COVERAGE),
    figure("Tensor Cores", pct(hl.tensor_core_share), "share of kernel time", "by kernel name (hmma, tensorop, 16816…) and matrix work in fp16/bf16/tf32/fp8/int8"),
    figure("Kernels per step", hl.kernels_per_step == null ? UNKNOWN : sig(hl.kernels_per_step), `median kernel ${time(hl.kernel_median_us)}`),
  );
}

function swatch(key: string): HTMLElement {
  return h("span", { class: "ov-swatch", style: { background: CATEGORY_COLORS[key] ?? UNKNOWN_COLOR } });
}

/** Steps as rows, categories as columns (only those with time); the step button scopes the other tabs. */
export function breakdownTable(steps: StepRow[], categories: OverviewCategory[], onStep: (i: number) => void): HTMLElement {
  const used = categories.filter((c) => steps.some((s) => Number(s[`${c.key}_us`]) > 0));
  const serving = steps.some((s) => s.phase);
  const gpu = !isCpuOnly(categories);
  const head = h(
    "tr",
    null,
    h("th", { text: "Step" }),
    ...(serving
      ? [
          h("th", { text: "Phase", title: "serving step annotation (vLLM execute_*, SGLang step[...])" }),
          h("th", { text: "Batch", title: "requests in the step" }),
          h("th", { text: "Tokens", title: "query tokens scheduled in the step" }),
        ]
      : []),
    h("th", { text: "Wall" }),
    gpu ? h("th", { text: "GPU busy" }) : null,
    ...used.map((c) => h("th", { class: c.kind === "idle" ? "ov-idle" : "" }, swatch(c.key), c.label)),
    h("th", { text: "Comm. overlapped", title: "communication that ran under compute (not part of the sum)" }),
    gpu ? h("th", { text: "Kernels" }) : null,
  );
  const name = spanNamer(steps.map((s) => s.span));
  const several = steps.some((o) => o.span !== steps[0]?.span);
  const rows = steps.map((s, i) =>
    h(
      "tr",
      null,
      h(
        "td",
        null,
        h("button", {
          class: "btn btn-small ov-step",
          text: several ? `${s.step} · ${name(s.span)}` : s.step, // the step chart's names: ranks in All ranks
          title: `Show only ${s.step} in the Kernel efficiency tab (${s.span})`,
          on: { click: () => onStep(i) },
        }),
      ),
      ...(serving
        ? [
            h("td", { class: "ov-phase", text: s.phase ?? "·" }),
            h("td", { class: "num", text: s.batch == null ? UNKNOWN : count(s.batch) }),
            h("td", { class: "num", text: s.tokens == null ? UNKNOWN : count(s.tokens) }),
          ]
        : []),
      h("td", { class: "num", text: time(s.wall_us) }),
      gpu ? h("td", { class: "num", text: pct(s.gpu_busy_pct) }) : null,
      ...used.map((c) => {
        const v = Number(s[`${c.key}_us`]) || 0;
        return h("td", { class: "num", title: pct(s.wall_us ? v / s.wall_us : null), text: v ? time(v) : "·" });
      }),
      h("td", { class: "num", text: s.comm_overlapped_us ? time(s.comm_overlapped_us) : "·" }),
      gpu ? h("td", { class: "num", text: count(s.kernel_count) }) : null,
    ),
  );
  const table = h("table", { class: "ov-table" }, h("thead", null, head), h("tbody", null, ...rows));
  return h("div", { class: "ov-table-wrap" }, table, htmlTableExport(table, "steps"));
}

function value(v: number | string | null | undefined, key: string): string {
  if (v == null) return UNKNOWN;
  if (typeof v === "string") return v;
  if (key.endsWith("_us")) return time(v);
  if (key.endsWith("share") || key === "efficiency" || key === "overlap_ratio") return pct(v);
  if (key === "bytes_per_step") return `${sig(v / 1e6)} MB`;
  return sig(v);
}

function label(key: string): string {
  return key.replace(/_us$/, "").replace(/_/g, " ");
}

export function recommendationList(recs: Recommendation[], onLink: (filter: string, op: string, span: string) => void): HTMLElement {
  if (!recs.length) {
    return h("div", { class: "muted ov-none", text: "No recommendation: no rule reached its threshold for this selection." });
  }
  return h(
    "ol",
    { class: "ov-recs" },
    ...recs.map((r) =>
      h(
        "li",
        { class: "ov-rec", attrs: { "data-rule": r.id } },
        h(
          "div",
          { class: "ov-rec-head" },
          h("span", { class: "ov-rec-title", text: r.title }),
          h("span", {
            class: "badge ov-rec-gain",
            text: `~${time(r.recoverable_us)} / step (${pct(r.recoverable_share)})`,
            title: "estimated recoverable time per step",
          }),
        ),
        h("div", { class: "ov-rec-advice", text: r.advice }),
        h(
          "div",
          { class: "ov-rec-figures" },
          ...Object.entries(r.figures).map(([k, v]) => h("span", { class: "ov-fig" }, h("span", { class: "muted", text: `${label(k)} ` }), value(v, k))),
        ),
        r.items.length
          ? h(
              "ul",
              { class: "ov-rec-items" },
              ...r.items.map((item) => {
                const name = String(item.display_name ?? item.name ?? item.call ?? "");
                const rest = Object.entries(item).filter(([k]) => k !== "name" && k !== "call" && k !== "display_name");
                return h("li", null, h("span", { class: "mono", text: name, title: String(item.name ?? name) }), " ", h("span", { class: "muted", text: rest.map(([k, v]) => `${label(k)} ${value(v, k)}`).join(" · ") }));
              }),
            )
          : null,
        r.links.length
          ? h(
              "div",
              { class: "ov-rec-links" },
              h("span", { class: "muted small", text: "Open in the kernel table or on the timeline: " }),
              ...r.links.map((l) =>
                h(
                  "span",
                  { class: "ov-link-pair" },
                  h("button", {
                    class: "btn btn-small ov-link",
                    // the readable name, elided in the middle past 60 characters; the raw name on hover
                    text: l.label.length > 60 ? l.label.slice(0, 40) + "…" + l.label.slice(-19) : l.label,
                    title: l.filter,
                    on: { click: () => onLink(l.filter, l.op, l.span) },
                  }),
                  timelineButton(l.filter, l.span, "on timeline"),
                ),
              ),
            )
          : null,
        h("div", { class: "muted small ov-rec-why", text: `Threshold: ${r.threshold}` }),
      ),
    ),
  );
}
