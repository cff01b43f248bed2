// One side of a diff: run / worker / span pickers (span includes "All spans"), like the header's picker.
import type { RunInfo, Selection } from "../../api";
import { field, h, setOptions } from "../../dom";
import { ALL_SPANS, ALL_WORKERS, spansOf, workerOptions } from "../../state";
import { spanLabel, statusSuffix } from "../../components/picker";

/** Make a selection valid for the runs there are: an unknown worker or span falls back to the first / "all". */
export function reconcileSide(runs: readonly RunInfo[], sel: Selection): Selection {
  const run = runs.find((r) => r.run === sel.run) ?? runs[0];
  if (!run) return sel;
  if (sel.worker === ALL_WORKERS && run.workers.length > 1) return { run: run.run, worker: ALL_WORKERS, span: ALL_SPANS };
  const worker = run.workers.find((w) => w.worker === sel.worker) ?? run.workers[0];
  const span = sel.span !== ALL_SPANS && worker?.spans.some((s) => s.span === sel.span) ? sel.span : ALL_SPANS;
  return { run: run.run, worker: worker?.worker ?? sel.worker, span };
}

export function sameSelection(a: Selection, b: Selection): boolean {
  return a.run === b.run && a.worker === b.worker && a.span === b.span;
}

export class DiffSide {
  readonly el: HTMLElement;
  private runSel: HTMLSelectElement;
  private workerSel: HTMLSelectElement;
  private spanSel: HTMLSelectElement;
  private runs: readonly RunInfo[] = [];
  private sel: Selection;

  constructor(
    label: string,
    letter: "A" | "B",
    initial: Selection,
    private onChange: (sel: Selection) => void,
    extra: HTMLElement | null = null,
  ) {
    this.sel = initial;
    const aria = (what: string) => ({ "aria-label": `${what} ${letter}` });
    this.runSel = h("select", { attrs: aria("Run") });
    this.workerSel = h("select", { attrs: aria("Worker") });
    this.spanSel = h("select", { attrs: aria("Span") });
    this.runSel.addEventListener("change", () => this.pick({ run: this.runSel.value, worker: "", span: ALL_SPANS }));
    this.workerSel.addEventListener("change", () => this.pick({ ...this.sel, worker: this.workerSel.value, span: ALL_SPANS }));
    this.spanSel.addEventListener("change", () => this.pick({ ...this.sel, span: this.spanSel.value }));
    this.el = h(
      "div",
      { class: `diff-side diff-side-${letter.toLowerCase()}` },
      h("div", { class: "diff-side-head" }, h("span", { class: `diff-letter diff-letter-${letter.toLowerCase()}`, text: letter }), h("span", { class: "diff-side-title", text: label }), extra),
      h("div", { class: "controls" }, field("Run", this.runSel), field("Worker", this.workerSel), field("Span", this.spanSel)),
    );
  }

  get value(): Selection {
    return this.sel;
  }

  private pick(sel: Selection): void {
    this.sel = reconcileSide(this.runs, sel);
    this.render();
    this.onChange(this.sel);
  }

  /** Show `sel` with the options of `runs` (no change event). */
  set(runs: readonly RunInfo[], sel: Selection): void {
    this.runs = runs;
    this.sel = sel;
    this.render();
  }

  private render(): void {
    const runs = this.runs;
    setOptions(this.runSel, runs.map((r) => [r.run, r.run + statusSuffix(r.status)] as const), this.sel.run);
    const run = runs.find((r) => r.run === this.sel.run);
    const workers = run?.workers ?? [];
    setOptions(this.workerSel, workerOptions(run), this.sel.worker);
    this.workerSel.disabled = workers.length <= 1;
    const allRanks = this.sel.worker === ALL_WORKERS;
    const spans = spansOf(run, this.sel.worker);
    setOptions(
      this.spanSel,
      [[ALL_SPANS, `All spans (${spans.length})`] as const, ...(allRanks ? [] : spans.map((s, i) => [s.span, spanLabel(s, i)] as const))],
      this.sel.span,
    );
    this.spanSel.disabled = allRanks;
    this.spanSel.title = this.sel.span === ALL_SPANS ? "All spans of this worker, together" : this.sel.span;
  }
}
