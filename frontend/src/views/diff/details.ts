// The details drawer of one diff row: both sides' figures side by side, with the deltas and per-span spreads.
import type { DiffRow } from "../../api";
import { h, replace } from "../../dom";
import { gbps, isKnown, pct, sig, time, UNKNOWN } from "../../format";
import { drawer, stat } from "../../components/details";
import { deltaClass, signedPct, signedTime, spreadText, statusTag } from "./format";

type Num = number | null;

function diffOf(a: Num, b: Num): Num {
  return isKnown(a) && isKnown(b) ? b - a : null;
}

function signed(v: Num, show: (x: number) => string): string {
  if (!isKnown(v)) return UNKNOWN;
  if (v === 0) return show(0);
  return (v > 0 ? "+" : "−") + show(Math.abs(v));
}

export class DiffDetails {
  readonly el: HTMLElement;
  private body = h("div", { class: "drawer-body" });

  constructor(onClose: () => void) {
    this.el = drawer("Diff details", this.body, onClose);
  }

  /** `byOp`: rows are ops (+ shapes), whose count is op calls; otherwise kernels, whose count is launches. */
  open(r: DiffRow, nameA: string, nameB: string, byOp = false): void {
    this.el.hidden = false;
    const onA = r.status !== "added";
    const onB = r.status !== "removed";
    const side = (on: boolean, text: string) => (on ? text : "not here");
    const line = (label: string, a: string, b: string, delta: string | HTMLElement = "", title?: string) =>
      h(
        "tr",
        { title },
        h("th", { text: label }),
        h("td", { class: onA ? "" : "muted", text: side(onA, a) }),
        h("td", { class: onB ? "" : "muted", text: side(onB, b) }),
        typeof delta === "string" ? h("td", { text: delta }) : h("td", null, delta),
      );
    const deltaTime = h("span", { class: deltaClass(r.delta_us, r.time_us_a), text: signedTime(r.delta_us) });
    const mean = diffOf(r.mean_us_a, r.mean_us_b);
    replace(
      this.body,
      h("div", { class: "kernel-name", text: r.name }),
      h(
        "div",
        { class: "stats" },
        h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Status" }), h("span", null, statusTag(r.status))),
        stat("Class", String(r.class)),
        stat("Δ per span", signedTime(r.delta_us)),
        stat("Δ %", signedPct(r.delta_pct), "(B − A) / A"),
        stat(
          "Within noise",
          r.within_noise == null ? UNKNOWN : r.within_noise ? "yes" : "no",
          r.within_noise == null ? "No spread: a side has a single span" : "Is the change smaller than the spread between spans?",
        ),
      ),
      h("h3", { class: "section-title", text: "Side by side (per span)" }),
      h(
        "table",
        { class: "diff-compare" },
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            h("th", { text: "" }),
            h("th", { text: "A", title: nameA }),
            h("th", { text: "B", title: nameB }),
            h("th", { text: "Δ B − A" }),
          ),
        ),
        h(
          "tbody",
          null,
          line(byOp ? "Op calls" : "Launches", sig(r.count_a), sig(r.count_b), signed(diffOf(r.count_a, r.count_b), sig)),
          line("Time", time(r.time_us_a), time(r.time_us_b), deltaTime),
          line("Mean per launch", time(r.mean_us_a), time(r.mean_us_b), signed(mean, time)),
          line("TFLOP/s", sig(r.tflops_a), sig(r.tflops_b), signed(diffOf(r.tflops_a, r.tflops_b), sig)),
          line("GB/s", gbps(r.gbps_a), gbps(r.gbps_b), signed(diffOf(r.gbps_a, r.gbps_b), gbps)),
          line("% of peak", pct(r.pct_peak_a), pct(r.pct_peak_b), signed(diffOf(r.pct_peak_a, r.pct_peak_b), (x) => pct(x) + " pt")),
          line("% of DRAM", pct(r.pct_dram_a), pct(r.pct_dram_b), signed(diffOf(r.pct_dram_a, r.pct_dram_b), (x) => pct(x) + " pt")),
          line("Efficiency", pct(r.efficiency_a), pct(r.efficiency_b), signed(diffOf(r.efficiency_a, r.efficiency_b), (x) => pct(x) + " pt")),
          line("dtype", r.dtype_a ?? UNKNOWN, r.dtype_b ?? UNKNOWN),
        ),
      ),
      h("h3", { class: "section-title", text: "Spread between spans" }),
      h(
        "table",
        { class: "diff-compare diff-spreads" },
        h("tbody", null, h("tr", null, h("th", { text: "A", title: nameA }), h("td", { text: onA ? spreadText(r.spread_a) : "not here" })),
          h("tr", null, h("th", { text: "B", title: nameB }), h("td", { text: onB ? spreadText(r.spread_b) : "not here" }))),
      ),
      h(
        "div",
        { class: "muted small diff-side-names" },
        h("div", { text: `A: ${nameA}` }),
        h("div", { text: `B: ${nameB}` }),
        h("div", { text: "A side has a spread only when it aggregates several spans (“All spans” of a worker with a repeating schedule)." }),
      ),
    );
  }

  close(): void {
    this.el.hidden = true;
    replace(this.body);
  }

  destroy(): void {
    this.close();
    this.el.remove();
  }
}
