// The header: run / worker / span pickers, a download menu for the augmented traces, the one-page report of the
// selection, and a refresh button.
import { api, routeUrl, type RunInfo, type SpanInfo } from "../api";
import { h, replace, setOptions } from "../dom";
import { bytes } from "../format";
import { ALL_SPANS, ALL_WORKERS, spansOf, workerOptions, type AppState } from "../state";
import { deviceOverride } from "./devicePicker";
import { openInPerfetto } from "./perfetto";

export interface PickerHandlers {
  onChange(patch: Partial<AppState>): void;
  onRefresh(): void;
}

export function statusSuffix(status: string): string {
  switch (status) {
    case "ready":
      return "";
    case "loading":
      return " (reading…)";
    case "pending":
      return " (queued)";
    case "error":
      return " (unreadable)";
    default:
      return ` (${status})`;
  }
}

/** A profiler time stamp (ns, µs, ms or s since the epoch) as UTC text, or null when it is not a plausible date. */
export function stampText(stamp: number): string | null {
  if (!Number.isFinite(stamp) || stamp <= 0) return null;
  const ms = stamp > 1e17 ? stamp / 1e6 : stamp > 1e14 ? stamp / 1e3 : stamp > 1e11 ? stamp : stamp * 1000;
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  if (year < 2000 || year > 2200) return null;
  return d.toISOString().slice(0, 23).replace("T", " ") + " UTC"; // to the ms: spans a second apart stay distinct
}

/** "2: 2026-11-22 20:41:07.123 UTC", or the span's file name when it has no plausible stamp. */
export function spanLabel(span: SpanInfo, index: number): string {
  const when = stampText(span.stamp);
  return (when ? `${index + 1}: ${when}` : span.span) + statusSuffix(span.status);
}

/** The labels of a worker's spans, each distinct: a label shared by two spans gets its position appended. */
export function spanLabels(spans: readonly SpanInfo[]): string[] {
  const labels = spans.map((s, i) => spanLabel(s, i));
  const seen = new Map<string, number>();
  for (const l of labels) seen.set(l, (seen.get(l) ?? 0) + 1);
  return labels.map((l, i) => ((seen.get(l) ?? 0) > 1 ? `${l} #${i + 1}` : l));
}

export class Picker {
  readonly el: HTMLElement;
  private runSel = h("select", { attrs: { "aria-label": "Run" } });
  private companions = h("span", { class: "field-note run-companions" });
  private workerSel = h("select", { attrs: { "aria-label": "Worker" } });
  private spanSel = h("select", { attrs: { "aria-label": "Span" } });
  private downloads = h("ul", { class: "menu-list" });
  private downloadMenu: HTMLDetailsElement;
  private reports = h("ul", { class: "menu-list" });
  private reportMenu: HTMLDetailsElement;

  constructor(handlers: PickerHandlers) {
    this.runSel.addEventListener("change", () => handlers.onChange({ run: this.runSel.value }));
    this.workerSel.addEventListener("change", () => handlers.onChange({ worker: this.workerSel.value }));
    this.spanSel.addEventListener("change", () => handlers.onChange({ span: this.spanSel.value }));
    this.downloadMenu = h(
      "details",
      { class: "menu" },
      h("summary", { class: "btn", text: "Download", title: "Augmented traces (gzip), one per span" }),
      h("div", { class: "menu-panel" }, h("div", { class: "menu-title", text: "Augmented traces (.json.gz)" }), this.downloads),
    );
    this.reportMenu = h(
      "details",
      { class: "menu" },
      h("summary", {
        class: "btn",
        text: "Report",
        title: "One page of this selection: step time, MFU, ranked recommendations, wasteful kernels, memory, ranks",
      }),
      h("div", { class: "menu-panel" }, h("div", { class: "menu-title", text: "Report of this selection" }), this.reports),
    );
    this.el = h(
      "div",
      { class: "pickers" },
      h("label", { class: "field" }, h("span", { class: "field-label", text: "Run" }), this.runSel, this.companions),
      h("label", { class: "field" }, h("span", { class: "field-label", text: "Worker" }), this.workerSel),
      h("label", { class: "field" }, h("span", { class: "field-label", text: "Span" }), this.spanSel),
      this.downloadMenu,
      this.reportMenu,
      h("button", {
        class: "btn btn-icon",
        text: "↻",
        title: "Look for new runs and spans now",
        attrs: { "aria-label": "Refresh" },
        on: { click: () => handlers.onRefresh() },
      }),
    );
  }

  update(runs: readonly RunInfo[], state: AppState): void {
    const run = runs.find((r) => r.run === state.run);
    this.el.hidden = runs.length === 0;
    setOptions(
      this.runSel,
      runs.map((r) => [r.run, runLabel(r.run) + statusSuffix(r.status)] as const),
      state.run ?? "",
    );
    this.runSel.disabled = runs.length === 0;
    const companions = run?.companions ?? [];
    this.companions.textContent = companions.length ? `+ ${companionsText(companions)}` : "";
    this.companions.title = companions.map((c) => `${c.file} (${c.kind})`).join("\n");
    this.companions.hidden = companions.length === 0;

    const workers = run?.workers ?? [];
    setOptions(this.workerSel, workerOptions(run), state.worker ?? "");
    this.workerSel.disabled = workers.length <= 1;

    const worker = workers.find((w) => w.worker === state.worker);
    const allRanks = state.worker === ALL_WORKERS;
    const spans = spansOf(run, state.worker);
    setOptions(
      this.spanSel,
      [
        [ALL_SPANS, allRanks ? `All spans of all ranks (${spans.length})` : `All spans (${spans.length})`] as const,
        ...(allRanks ? [] : spanLabels(spans).map((label, i) => [spans[i].span, label] as const)),
      ],
      state.span,
    );
    this.spanSel.disabled = !worker || allRanks;
    this.spanSel.title = state.span === ALL_SPANS ? "All spans of this worker, together" : state.span;

    replace(
      this.downloads,
      ...(run && worker && spans.length
        ? spans.map((s) =>
            h(
              "li",
              null,
              h("a", {
                text: s.span + fetchNotice(s),
                attrs: { href: api.traceUrl(run.run, worker.worker, s.span), download: "" },
              }),
              perfettoButton(api.traceUrl(run.run, worker.worker, s.span), `${run.run} / ${s.span}`),
            ),
          )
        : [h("li", { class: "muted", text: "No spans" })]),
    );
    this.downloadMenu.hidden = !worker;
    replace(this.reports, ...(run && state.worker ? reportLinks(run.run, state.worker, state.span) : []));
    this.reportMenu.hidden = !run || !state.worker;
  }
}

const REPORT_FORMATS = [
  ["md", "Markdown (.md)"],
  ["html", "HTML page (.html)"],
  ["json", "JSON (.json, for scripts and agents)"],
] as const;

/** The report of a selection in each format, as download links (the server names the Markdown and HTML files). */
export function reportLinks(run: string, worker: string, span: string): HTMLElement[] {
  // The device picked for a trace that does not name its GPU is read at the click: it may change after the menu.
  const url = (format: string) => routeUrl("report", { run, worker, span, format, device_name: deviceOverride(run) ?? undefined });
  return REPORT_FORMATS.map(([format, label]) =>
    h(
      "li",
      null,
      h("a", {
        text: label,
        attrs: { href: url(format), download: format === "json" ? "gpuinsight-report.json" : "" },
        on: { click: (e: Event) => ((e.currentTarget as HTMLAnchorElement).href = url(format)) },
      }),
    ),
  );
}

/** What a download of a trace in object storage costs first (it is fetched whole), else nothing. */
export function fetchNotice(span: SpanInfo): string {
  return span.remote && span.bytes != null ? ` (fetches ${bytes(span.bytes)} from object storage first)` : "";
}

/** "Open in Perfetto" beside a download link; its own text says how it went (offline: download instead). */
function perfettoButton(url: string, title: string): HTMLElement {
  const note = h("span", { class: "muted small" });
  const btn = h("button", {
    class: "btn btn-small",
    text: "Open in Perfetto",
    title: "Open this augmented trace in ui.perfetto.dev (needs internet)",
    on: { click: () => openInPerfetto(url, title, (text) => replace(note, " " + text)) },
  });
  return h("span", null, " ", btn, note);
}

/** A run's name in the picker: traces lying directly in the logdir form the run "." (TensorBoard's name for it). */
export function runLabel(run: string): string {
  return run === "." ? ". (files at the logdir's top level)" : run;
}

/** "1 graph capture", "3 graph captures": what a run holds beside its spans (each file in the tooltip). */
export function companionsText(companions: readonly { kind: string }[]): string {
  const counts = new Map<string, number>();
  for (const c of companions) counts.set(c.kind, (counts.get(c.kind) ?? 0) + 1);
  return [...counts].map(([kind, n]) => `${n} ${kind}${n === 1 ? "" : "s"}`).join(", ");
}
