// Export from the UI: CSV / JSON of a table as shown (Tabulator's download module) and a PNG of a chart (ECharts'
// getDataURL) or of the graph (Cytoscape's png). File names carry the shown run / worker / span, set by the shell.
import type { Core } from "cytoscape";
import type { ECharts } from "echarts/core";
import { h } from "./dom";

let context: string[] = [];

/** What the exported files are named after: the shell's current run, worker and span. */
export function setExportContext(parts: ReadonlyArray<string | null | undefined>): void {
  context = parts.filter((p): p is string => !!p);
}

/** A file name safe on every OS: gpuinsight_<run>_<worker>_<span>_<what>.<ext>. */
export function exportName(what: string, ext: string): string {
  const base = ["gpuinsight", ...context, what].join("_").replace(/[^A-Za-z0-9._-]+/g, "-").replace(/-+/g, "-");
  return `${base.slice(0, 180)}.${ext}`;
}

/** Save a data: or blob: URL under `filename` (the iframe's CSP allows both as download links). */
export function saveUrl(url: string, filename: string): void {
  const a = h("a", { attrs: { href: url, download: filename } });
  a.style.display = "none";
  document.body.appendChild(a);
  a.click();
  a.remove();
}

/** The "CSV" and "JSON" buttons of a table; `download` receives the format. */
export function tableExportButtons(download: (type: "csv" | "json") => void): HTMLElement {
  const btn = (type: "csv" | "json") =>
    h("button", {
      class: "btn btn-small export-btn",
      text: type.toUpperCase(),
      title: `Download the rows shown (this page, filters applied) as ${type.toUpperCase()}`,
      attrs: { type: "button", "data-export": type },
      on: { click: () => download(type) },
    });
  return h("span", { class: "export-buttons" }, h("span", { class: "muted small", text: "Export" }), btn("csv"), btn("json"));
}

/** The panel's background colour, painted under exported images (charts draw on a transparent background). */
function panelColour(): string {
  return getComputedStyle(document.documentElement).getPropertyValue("--gi-panel").trim() || "#ffffff";
}

/** A small "PNG" button (over a chart, or in a toolbar with `cls` ""); `render` gives the image as a data: URL. */
function pngButton(title: string, name: string, render: (background: string) => string | null, cls = "chart-png"): HTMLElement {
  return h("button", {
    class: `btn btn-small ${cls}`.trim(),
    text: "PNG",
    title,
    attrs: { type: "button", "data-export": "png" },
    on: {
      click: (e) => {
        e.stopPropagation();
        const url = render(panelColour());
        if (url) saveUrl(url, exportName(name, "png"));
      },
    },
  });
}

/** Save `chart` as drawn (ECharts' getDataURL, at twice the screen resolution). */
export function chartPngButton(chart: ECharts, name: string): HTMLElement {
  return pngButton("Save this chart as a PNG image", name, (backgroundColor) =>
    chart.getDataURL({ type: "png", pixelRatio: 2, backgroundColor, excludeComponents: ["toolbox"] }),
  );
}

/** A CSV field, quoted when it holds a separator, a quote or a line break. */
function csvField(v: string): string {
  return /[",\n\r]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

/** A plain HTML table's header and rows as the user sees them (cell text, numbers with their units). */
export function tableText(table: HTMLTableElement): { head: string[]; rows: string[][] } {
  const text = (c: Element) => (c.textContent ?? "").replace(/\s+/g, " ").trim();
  const head = [...(table.tHead?.rows[0]?.cells ?? [])].map(text);
  const rows = [...table.tBodies].flatMap((b) => [...b.rows]).map((r) => [...r.cells].map(text));
  return { head, rows };
}

/** Save a text as a file (through a blob: link, released once the download has started). */
function saveText(text: string, type: string, filename: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  saveUrl(url, filename);
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** CSV / JSON buttons for a plain HTML table (tables that are not Tabulator tables), exported as shown. */
export function htmlTableExport(table: HTMLTableElement, name: string): HTMLElement {
  return h(
    "div",
    { class: "html-table-export" },
    tableExportButtons((type) => {
      const { head, rows } = tableText(table);
      if (type === "csv") {
        saveText([head, ...rows].map((r) => r.map(csvField).join(",")).join("\n") + "\n", "text/csv", exportName(name, "csv"));
      } else {
        const objects = rows.map((r) => Object.fromEntries(head.map((k, i) => [k || `column ${i + 1}`, r[i] ?? ""])));
        saveText(JSON.stringify(objects, null, 2), "application/json", exportName(name, "json"));
      }
    }),
  );
}

/** Save a plain canvas (the Timeline) as drawn: its own pixels over the panel's background. */
export function canvasPngButton(canvas: HTMLCanvasElement, name: string): HTMLElement {
  return pngButton("Save this view as a PNG image", name, (background) => {
    const out = document.createElement("canvas");
    out.width = canvas.width;
    out.height = canvas.height;
    const c = out.getContext("2d");
    if (!c) return null;
    c.fillStyle = background;
    c.fillRect(0, 0, out.width, out.height);
    c.drawImage(canvas, 0, 0);
    return out.toDataURL("image/png");
  });
}

/** Save the whole Execution graph as drawn (Cytoscape's own PNG export, at twice the screen resolution). */
export function graphPngButton(cy: () => Core | null, name: string): HTMLElement {
  return pngButton("Save the whole graph as a PNG image", name, (bg) => cy()?.png({ full: true, scale: 2, bg, output: "base64uri" }) ?? null, "");
}
