// The Diff table: one row per kernel (or op + shapes) with both sides' figures and the deltas, in Tabulator with
// remote (server-side) sorting and pagination. Cells are DOM nodes filled through textContent (see kernelTable.ts).
// Importing kernelTable.ts also registers the Tabulator modules this table needs.
import { Tabulator, type CellComponent, type ColumnDefinition, type RowComponent } from "tabulator-tables";
import type { DiffResponse, DiffRow, DiffSort, Order } from "../api";
import { h } from "../dom";
import { count, isKnown, pct, sig, time } from "../format";
import { deltaClass, noiseTitle, signedPct, signedTime, spreadText, statusTag } from "./diffFormat";
import { cellText, pctBar, unknown } from "./kernelTable";
import { emptyState } from "./states";

export interface DiffPageRequest {
  sort: DiffSort;
  order: Order;
  offset: number;
  limit: number;
}

export interface DiffTableOptions {
  pageSize: number;
  /** Fetch one page; the caller adds the two sides and the filters. */
  fetchPage(req: DiffPageRequest): Promise<DiffResponse>;
  onLoaded(res: DiffResponse, sort: DiffSort): void;
  onSelect(row: DiffRow): void;
  onError(message: string): void;
}

const SORTABLE: ReadonlySet<string> = new Set(["name", "class", "status", "time_us_a", "time_us_b", "delta_us", "delta_pct"]);

type Formatter = (row: DiffRow) => HTMLElement;

/** A fractional count (calls per span, averaged over spans) with at most one decimal. */
function calls(v: number | null): string {
  if (!isKnown(v)) return "";
  return Number.isInteger(v) ? count(v) : sig(v);
}

function sideMissing(r: DiffRow, side: "a" | "b"): boolean {
  return (side === "a" && r.status === "added") || (side === "b" && r.status === "removed");
}

export class DiffTable {
  private table: Tabulator;
  private built: Promise<void>;
  private selectedName: string | null = null;
  private destroyed = false;

  constructor(
    container: HTMLElement,
    private opts: DiffTableOptions,
  ) {
    const fmt = (f: Formatter) => (cell: CellComponent) => f(cell.getRow().getData() as DiffRow);
    const header = (title: string, tip: string) => () => h("span", { text: title, title: tip });
    const absent = (side: "a" | "b") => h("span", { class: "cell-absent", text: "", title: side === "a" ? "not in A" : "not in B" });
    /** A per-side cell: blank when the row is not on that side, "—" with a reason when the value is unknown. */
    const sideCell = (side: "a" | "b", value: (r: DiffRow) => number | null, show: (v: number, r: DiffRow) => HTMLElement, why: string) =>
      fmt((r) => {
        if (sideMissing(r, side)) return absent(side);
        const v = value(r);
        return v == null ? unknown(why) : show(v, r);
      });
    const pair = (
      title: string,
      tip: string,
      key: "count" | "time_us" | "tflops" | "pct_peak",
      width: number,
      show: (v: number, r: DiffRow, side: "a" | "b") => HTMLElement,
      why: string,
      sortable: boolean,
    ): ColumnDefinition => ({
      title,
      titleFormatter: header(title, tip),
      columns: (["a", "b"] as const).map((side) => ({
        title: side.toUpperCase(),
        field: `${key}_${side}`,
        width,
        hozAlign: key === "pct_peak" ? "left" : "right",
        headerSort: sortable,
        titleFormatter: header(side.toUpperCase(), `${tip}: ${side === "a" ? "baseline (A)" : "compare (B)"}`),
        formatter: sideCell(side, (r) => r[`${key}_${side}`], (v, r) => show(v, r, side), why),
      })),
    });

    const columns: ColumnDefinition[] = [
      {
        title: "Name",
        field: "name",
        minWidth: 260,
        widthGrow: 4,
        headerSortStartingDir: "asc",
        titleFormatter: header("Name", "Kernel name (or launching op with its input shapes), as matched across the two sides"),
        formatter: fmt((r) => cellText(r.name, r.name, "cell-text cell-name")),
      },
      {
        title: "Class",
        field: "class",
        width: 104,
        headerSortStartingDir: "asc",
        titleFormatter: header("Class", "Kernel class: GEMM, attention, convolution, elementwise, reduction…"),
        formatter: fmt((r) => cellText(r.class)),
      },
      {
        title: "Status",
        field: "status",
        width: 84,
        headerSortStartingDir: "asc",
        titleFormatter: header("Status", "both sides, added (only in B) or removed (only in A)"),
        formatter: fmt((r) => statusTag(r.status)),
      },
      pair("Calls", "Calls per span", "count", 62, (v) => cellText(calls(v)), "unknown", false),
      pair("Time", "GPU time per span", "time_us", 82, (v, r, side) => cellText(time(v), spreadText(side === "a" ? r.spread_a : r.spread_b)), "unknown", true),
      {
        title: "Δ time",
        field: "delta_us",
        width: 96,
        hozAlign: "right",
        titleFormatter: header("Δ time", "B − A per span: green is faster in B, red is slower"),
        formatter: fmt((r) =>
          r.delta_us == null
            ? unknown("unknown")
            : h("span", { class: "cell-text " + deltaClass(r.delta_us, r.time_us_a), text: signedTime(r.delta_us) }),
        ),
      },
      {
        title: "Δ %",
        field: "delta_pct",
        width: 80,
        hozAlign: "right",
        titleFormatter: header("Δ %", "(B − A) / A"),
        formatter: fmt((r) =>
          r.delta_pct == null
            ? unknown(r.status === "both" ? "unknown" : `${r.status}: no relative change`)
            : h("span", { class: "cell-text " + deltaClass(r.delta_us, r.time_us_a), text: signedPct(r.delta_pct) }),
        ),
      },
      pair("TFLOP/s", "Achieved TFLOP/s", "tflops", 70, (v) => cellText(sig(v)), "no FLOP estimate for this kernel", false),
      pair(
        "% of peak",
        "Achieved TFLOP/s as a share of the datasheet peak for the kernel's dtype",
        "pct_peak",
        108,
        (v, r, side) => pctBar(v, "pbar-compute", `${pct(v)} of ${(side === "a" ? r.dtype_a : r.dtype_b) ?? ""} peak`),
        "no FLOP estimate or no datasheet peak",
        false,
      ),
      {
        title: "Noise",
        field: "within_noise",
        width: 62,
        hozAlign: "center",
        headerSort: false,
        titleFormatter: header("Noise", "≈: the change is within the spread between spans (hover for the spreads)"),
        formatter: fmt((r) =>
          r.within_noise === true
            ? h("span", { class: "noise-mark", text: "≈", title: noiseTitle(r) })
            : r.within_noise === false
              ? h("span", { class: "muted", text: "", title: "The change is larger than the spread between spans" })
              : h("span", { class: "cell-unknown", text: "", title: "No spread: a side has a single span" }),
        ),
      },
    ];

    const el = h("div");
    container.appendChild(el);
    this.table = new Tabulator(el, {
      layout: "fitColumns",
      maxHeight: "620px",
      columns,
      columnDefaults: { headerSortStartingDir: "desc", resizable: true, vertAlign: "middle" },
      sortMode: "remote",
      pagination: true,
      paginationMode: "remote",
      paginationSize: opts.pageSize,
      paginationCounter: "rows",
      paginationButtonCount: 5,
      ajaxURL: "diff",
      ajaxRequestFunc: (_url: string, _config: unknown, params: TabulatorParams) => this.request(params),
      placeholder: () => emptyState("No rows", "No kernel matches the current name and status filters."),
      dataLoaderLoading: h("span", { class: "table-loading", text: "Comparing…" }),
      rowFormatter: (row: RowComponent) => {
        const data = row.getData() as DiffRow;
        row.getElement().classList.toggle("row-selected", data.name === this.selectedName);
      },
    });
    this.built = new Promise((resolve) =>
      this.table.on("tableBuilt", () => {
        this.table.on("rowClick", (_e: UIEvent, row: RowComponent) => {
          const data = row.getData() as DiffRow;
          this.select(data.name);
          opts.onSelect(data);
        });
        resolve();
      }),
    );
  }

  private async request(params: TabulatorParams): Promise<RemotePage> {
    const size = params.size ?? this.opts.pageSize;
    const page = params.page ?? 1;
    const sorter = params.sort?.[0];
    // No column sort: by impact on total GPU time (|Δ time|), the most telling order.
    const sort: DiffSort = sorter && SORTABLE.has(sorter.field) ? (sorter.field as DiffSort) : "impact";
    try {
      const res = await this.opts.fetchPage({
        sort,
        order: sorter?.dir === "asc" ? "asc" : "desc",
        offset: (page - 1) * size,
        limit: size,
      });
      if (!this.destroyed) this.opts.onLoaded(res, sort);
      return { last_page: Math.max(1, Math.ceil(res.total / size)), last_row: res.total, data: res.rows };
    } catch (err) {
      if (!this.destroyed && !(err instanceof DOMException && err.name === "AbortError")) {
        this.opts.onError(err instanceof Error ? err.message : String(err));
      }
      return { last_page: 1, last_row: 0, data: [] };
    }
  }

  /** Fetch again from the first page (after a change of a filter). */
  async reload(): Promise<void> {
    await this.built;
    if (this.destroyed) return;
    await this.table.setData();
  }

  /** Back to the default order (impact), then fetch again. */
  async sortByImpact(): Promise<void> {
    await this.built;
    if (this.destroyed) return;
    this.table.clearSort();
    await this.table.setData();
  }

  select(name: string | null): void {
    this.selectedName = name;
    if (this.destroyed) return;
    for (const row of this.table.getRows()) {
      row.getElement().classList.toggle("row-selected", (row.getData() as DiffRow).name === name);
    }
  }

  destroy(): void {
    this.destroyed = true;
    this.table.destroy();
  }
}

interface TabulatorParams {
  page?: number;
  size?: number;
  sort?: { field: string; dir: "asc" | "desc" }[];
}

interface RemotePage {
  last_page: number;
  last_row: number;
  data: DiffRow[];
}
